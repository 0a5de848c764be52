//go:build !cgo

package main

const cgo = false

// twice doubles in Go.
func twice(x int) int { return 2 * x }
