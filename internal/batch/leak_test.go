package batch

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts ends with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
