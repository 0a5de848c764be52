package bank

import (
	"os"
	"sync"
	"testing"
)

// TestDeposits has two tellers deposit at once; no deposit may be lost.
func TestDeposits(t *testing.T) {
	b := Bank{Ledger: os.Stdout}
	var wg sync.WaitGroup
	for _, teller := range []string{"alice", "bob"} {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			b.Deposit(name, 100)
		}(teller)
	}
	wg.Wait()
	if got := b.Balance(); got != 200 {
		t.Fatalf("balance %d, want 200: a deposit was lost", got)
	}
}
