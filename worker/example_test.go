package worker_test

import (
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden/worker"
)

// The retry policy is a pure function: the ceiling doubles with each attempt
// up to Max, the jitter picks a point below it, and a Retry-After is honoured
// up to Max.
func ExampleNextDelay() {
	b := worker.Backoff{Initial: time.Second, Max: time.Minute}
	for attempt := 1; attempt <= 8; attempt++ {
		fmt.Printf("attempt %d: up to %s\n", attempt, worker.NextDelay(attempt, b, 0, 1))
	}
	fmt.Println("half-way jitter on attempt 4:", worker.NextDelay(4, b, 0, 0.5))
	fmt.Println("Retry-After 2h:", worker.NextDelay(1, b, 2*time.Hour, 0))
	// Output:
	// attempt 1: up to 1s
	// attempt 2: up to 2s
	// attempt 3: up to 4s
	// attempt 4: up to 8s
	// attempt 5: up to 16s
	// attempt 6: up to 32s
	// attempt 7: up to 1m0s
	// attempt 8: up to 1m0s
	// half-way jitter on attempt 4: 4s
	// Retry-After 2h: 1m0s
}
