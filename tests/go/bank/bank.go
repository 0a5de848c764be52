// Package bank keeps a balance that tellers deposit into at once.
//
// Each deposit reads the balance, writes a line to the ledger (a system
// call), then stores the balance it read plus the deposit. Without the lock
// (racy.go) another teller can store between that read and that store, and a
// deposit is lost; fixed.go, built with -tags fixed, holds a sync.Mutex.
package bank

import (
	"fmt"
	"io"
)

// Bank holds the money and writes every deposit to its ledger.
type Bank struct {
	balance int
	lock    locker
	Ledger  io.Writer
}

// Deposit adds amount to the balance.
func (b *Bank) Deposit(teller string, amount int) {
	b.lock.Lock()
	seen := b.balance
	fmt.Fprintf(b.Ledger, "%s: balance %d, depositing %d\n", teller, seen, amount)
	b.balance = seen + amount
	b.lock.Unlock()
}

// Balance is the money held.
func (b *Bank) Balance() int {
	b.lock.Lock()
	defer b.lock.Unlock()
	return b.balance
}
