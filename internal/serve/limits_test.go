package serve

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestLimitUntilMidnight(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	for _, tt := range []struct {
		at   time.Time
		want time.Duration
	}{
		{time.Date(2025, 3, 1, 23, 0, 0, 0, time.UTC), time.Hour},
		{time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), 24 * time.Hour},
		{time.Date(2025, 12, 31, 23, 59, 30, 0, time.UTC), 30 * time.Second},
		// 00:30 in Paris is 23:30 UTC the day before.
		{time.Date(2025, 3, 2, 0, 30, 0, 0, paris), 30 * time.Minute},
	} {
		if got := untilMidnight(tt.at); got != tt.want {
			t.Errorf("untilMidnight(%v) = %v, want %v", tt.at, got, tt.want)
		}
	}
	if got := utcDay(time.Date(2025, 3, 2, 0, 30, 0, 0, paris)); got != "2025-03-01" {
		t.Errorf("utcDay = %s", got)
	}
}

// A body that came slower than the server's read deadline is refused as
// the client's: a 408 of kind timeout, whatever the handler reading it does
// with the error.
func TestSlowBodyIsRefused(t *testing.T) {
	b := &boundedBody{ReadCloser: io.NopCloser(iotest.ErrReader(fmt.Errorf("read tcp: %w", os.ErrDeadlineExceeded)))}
	_, err := b.Read(make([]byte, 1))
	r := AsRefusal(fmt.Errorf("reading the request: %w", err))
	if r == nil || r.Status != http.StatusRequestTimeout || r.Kind != RefusedTimeout || !strings.Contains(r.Message, "--body-timeout") {
		t.Errorf("a slow body: %+v; want a 408 of kind timeout naming --body-timeout", r)
	}
}

// A deadline that is not the client's body (the sandbox's, the state's)
// is terp's failure, never a 408 that blames the client.
func TestOtherDeadlinesAreNotTheClients(t *testing.T) {
	err := fmt.Errorf("reading the container: %w", os.ErrDeadlineExceeded)
	if AsRefusal(err) != nil || StatusOf(err) != http.StatusInternalServerError {
		t.Errorf("a state query past its deadline is %d (refusal %v); want 500", StatusOf(err), AsRefusal(err))
	}
}
