//go:build cgo

package main

// int twice(int x) { return 2 * x; }
import "C"

const cgo = true

// twice doubles in C.
func twice(x int) int { return int(C.twice(C.int(x))) }
