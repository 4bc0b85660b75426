package config

import (
	"strings"
	"testing"
	"time"
)

// TestRetentionMarginIsWhatValidateChecks: the margin the metrics and the
// dashboard show is retention.claims minus (retry_horizon +
// redrive_window), and Validate refuses exactly the configurations where it
// is negative, naming the retention needed.
func TestRetentionMarginIsWhatValidateChecks(t *testing.T) {
	for _, tc := range []struct {
		claims, horizon, redrive time.Duration
		want                     time.Duration
	}{
		{30 * Day, 3 * Day, 7 * Day, 20 * Day},
		{10 * Day, 3 * Day, 7 * Day, 0},
		{9 * Day, 3 * Day, 7 * Day, -Day},
	} {
		c := Config{Sources: []Source{{Name: "s", Scheme: "none", AllowUnsigned: true,
			RetryHorizon: Duration(tc.horizon), RedriveWindow: Duration(tc.redrive)}}}
		c.ApplyDefaults()
		c.Retention.Claims = Duration(tc.claims)
		if got := c.RetentionMargin(&c.Sources[0]); got != tc.want {
			t.Errorf("claims %s, horizon %s, redrive %s: margin %s, want %s",
				Duration(tc.claims), Duration(tc.horizon), Duration(tc.redrive), Duration(got), Duration(tc.want))
		}
		var msg string
		for _, p := range Errors(c.Validate()) {
			if p.Path == "retention.claims" {
				msg = p.Message
			}
		}
		if (msg != "") != (tc.want < 0) {
			t.Errorf("margin %s: retention.claims problem %q", Duration(tc.want), msg)
		}
		if msg != "" && !strings.Contains(msg, "(10d)") {
			t.Errorf("problem %q does not name the 10d needed", msg)
		}
	}
}
