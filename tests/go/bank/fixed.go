//go:build fixed

package bank

import "sync"

// locker is a mutex: a deposit's read and store happen together.
type locker struct{ sync.Mutex }
