package serve

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm/llmtest"
)

// A protocol whose clients write the code (Jupyter's, LibreChat's, MCP's)
// runs it through the host's one exec path: in the key's own container,
// with every byte of its output streamed as it is printed, however much
// more than a model would be shown, counted in the metrics as a model's
// runs are, and held to the server's run cap.
func TestExecPathStreamsEveryByte(t *testing.T) {
	ts := newTestHost(t, llmtest.New(t), func(c *Config) { c.Caps.Runs = 1 })
	ts.srv.Register(Protocol{Name: "exec", Routes: []Route{{Pattern: "POST /exec/{id}", Handler: func(w http.ResponseWriter, r *http.Request) {
		l, err := ts.srv.Acquire(r.Context(), Owner(r), r.PathValue("id"))
		switch {
		case err != nil:
			refusePlainly(w, err)
			return
		case l == nil:
			refusePlainly(w, &NotFoundError{Kind: "container", ID: r.PathValue("id")})
			return
		}
		defer l.Release(r.Context())
		code, _ := io.ReadAll(r.Body)
		var mu sync.Mutex
		started := false
		res, err := ts.srv.Exec(r.Context(), l, string(code), func(o kernel.Output) {
			mu.Lock()
			defer mu.Unlock()
			if !started {
				w.WriteHeader(http.StatusOK)
				started = true
			}
			_, _ = io.WriteString(w, o.Text)
		})
		if err != nil {
			if !started {
				refusePlainly(w, err)
			}
			return
		}
		if !started {
			w.WriteHeader(http.StatusOK)
		}
		fmt.Fprintf(w, "EXIT %d\n", res.ExitCode)
	}}}})

	made := ts.create(t, "exec")
	post := func(key, id, code string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx(t), "POST", ts.URL+"/exec/"+id, strings.NewReader(code))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// 50,000 lines, far past what a model is shown of a run.
	const lines = 50000
	resp := post(aliceKey, made.ID, fmt.Sprintf("for i in range(%d):\n    print('line', i)", lines))
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "EXIT ") {
			if sc.Text() != "EXIT 0" {
				t.Errorf("the run ended %q", sc.Text())
			}
			break
		}
		if want := fmt.Sprint("line ", n); sc.Text() != want {
			t.Fatalf("line %d of the stream is %q; want %q", n, sc.Text(), want)
		}
		n++
	}
	if n != lines {
		t.Errorf("the stream carried %d lines; want all %d", n, lines)
	}
	var ok dto.Metric
	if err := ts.srv.metrics.runs.WithLabelValues(runOK).Write(&ok); err != nil {
		t.Fatal(err)
	}
	if got := ok.GetCounter().GetValue(); got != 1 {
		t.Errorf("terp_code_runs_total{result=ok} = %v after the run; want 1", got)
	}

	// Another key cannot run code in alice's container.
	bob := post(bobKey, made.ID, "print('mine now')")
	bob.Body.Close()
	if bob.StatusCode != http.StatusNotFound {
		t.Errorf("bob ran code in alice's container: %d", bob.StatusCode)
	}

	// With the run cap held, a run is refused at once, as a turn is.
	held := ts.srv.lim.takeRun()
	if held != nil {
		t.Fatal(held)
	}
	capped := post(aliceKey, made.ID, "print(1)")
	b, _ := io.ReadAll(capped.Body)
	capped.Body.Close()
	if capped.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "--max-runs") {
		t.Errorf("a run over the run cap: %d %s; want 429 runs", capped.StatusCode, b)
	}
	(&run{s: ts.srv}).done()
}
