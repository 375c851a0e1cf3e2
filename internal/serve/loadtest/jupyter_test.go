package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkLoadJupyter opens N kernels at once through terp serve's Jupyter
// API, as N Open WebUI users would: each client starts a kernel (POST
// /api/kernels with ?token=), opens its websocket, runs a cell that sets a
// variable and prints twice it, and keeps the kernel open until every
// client's cell has answered; then the memory is read and every kernel is
// deleted. On the local backend, TERP_LOAD_JUPYTER kernels (64 by default).
//
// Reported: kernels/s (N over the wave's wall time), p50-ms and p99-ms of a
// client's whole start-connect-run, MiB/kernel (PSS of terp serve and the
// sandboxes' processes with every kernel open, less before the wave), and
// errors (any fails the run).
func BenchmarkLoadJupyter(b *testing.B) {
	heavy(b)
	n := envInt("TERP_LOAD_JUPYTER", 64)
	b.Run(fmt.Sprintf("local/n=%d", n), func(b *testing.B) {
		ctx := context.Background()
		st := startStack(b, stackConfig{sandbox: "local", keys: (n + clientsPerKey - 1) / clientsPerKey, idlePause: idlePause})
		base := strings.TrimSuffix(st.gateway.url, "/v1")
		var lat []time.Duration
		var wall time.Duration
		var live int64
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			before := st.settle(ctx, b, time.Minute)
			b.StartTimer()
			start := time.Now()
			ks := make([]*jupyterKernel, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					ks[i], errs[i] = openKernel(ctx, base, st.keys[i%len(st.keys)], i)
				})
			}
			wg.Wait()
			b.StopTimer()
			wall += time.Since(start)
			for i, err := range errs {
				if err != nil {
					b.Fatalf("kernel %d of %d: %v", i, n, err)
				}
				lat = append(lat, ks[i].took)
			}
			full := st.snapshot(ctx)
			live += full.total().PSS - before.total().PSS
			for _, k := range ks {
				if err := k.close(ctx); err != nil {
					b.Fatal(err)
				}
			}
			gone := st.settle(ctx, b, time.Minute)
			if gone.dirs != before.dirs {
				b.Fatalf("%d sandbox directories after the kernels were deleted, %d before", gone.dirs, before.dirs)
			}
			b.StartTimer()
		}
		b.StopTimer()
		count := float64(len(lat))
		d := append([]time.Duration(nil), lat...)
		slices.Sort(d)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(count/wall.Seconds(), "kernels/s")
		b.ReportMetric(ms(percentile(d, 50)), "p50-ms")
		b.ReportMetric(ms(percentile(d, 99)), "p99-ms")
		b.ReportMetric(float64(live)/mib/count, "MiB/kernel")
		b.ReportMetric(0, "errors")
		b.Logf("%d kernels open at once on --sandbox local: %.2f kernels/s, start-connect-run p50 %s p99 %s, %s a kernel",
			n, count/wall.Seconds(), round(percentile(d, 50)), round(percentile(d, 99)), mibs(live/int64(count)))
	})
}

// jupyterKernel is one client's kernel and its open websocket.
type jupyterKernel struct {
	base, key, id string
	ws            *websocket.Conn
	took          time.Duration
}

// openKernel starts a kernel, connects, and runs a cell whose output it
// checks, as Open WebUI does before it deletes the kernel (here, later).
func openKernel(ctx context.Context, base, key string, i int) (*jupyterKernel, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/kernels?token="+key, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	var k struct {
		ID string `json:"id"`
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &k) != nil {
		return nil, fmt.Errorf("POST /api/kernels: %s %s", resp.Status, b)
	}
	ws, wresp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/kernels/"+k.ID+"/channels?token="+key, nil)
	if wresp != nil && wresp.Body != nil {
		wresp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	msgID := fmt.Sprintf("load-%d", i)
	request, _ := json.Marshal(map[string]any{"channel": "shell", "parent_header": map[string]any{}, "metadata": map[string]any{},
		"header":  map[string]string{"msg_id": msgID, "msg_type": "execute_request", "username": "load", "session": msgID, "version": "5.3"},
		"content": map[string]any{"code": fmt.Sprintf("x = %d\nprint(x * 2)", secret(i)), "silent": false}})
	if err := ws.Write(ctx, websocket.MessageText, request); err != nil {
		return nil, err
	}
	var out strings.Builder
	idle, replied := false, false
	for !idle || !replied {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading kernel %s: %w", k.ID, err)
		}
		var m struct {
			MsgType      string `json:"msg_type"`
			ParentHeader struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content map[string]any `json:"content"`
		}
		if json.Unmarshal(b, &m) != nil || m.ParentHeader.MsgID != msgID {
			continue
		}
		switch m.MsgType {
		case "stream":
			fmt.Fprint(&out, m.Content["text"])
		case "execute_reply":
			replied = true
			if m.Content["status"] != "ok" {
				return nil, fmt.Errorf("kernel %s: execute_reply %v", k.ID, m.Content)
			}
		case "status":
			idle = m.Content["execution_state"] == "idle"
		}
	}
	if want := fmt.Sprintf("%d\n", 2*secret(i)); out.String() != want {
		return nil, fmt.Errorf("kernel %s printed %q; want %q", k.ID, out.String(), want)
	}
	return &jupyterKernel{base: base, key: key, id: k.ID, ws: ws, took: time.Since(start)}, nil
}

// close closes the websocket and deletes the kernel.
func (k *jupyterKernel) close(ctx context.Context) error {
	_ = k.ws.Close(websocket.StatusNormalClosure, "")
	req, _ := http.NewRequestWithContext(ctx, "DELETE", k.base+"/api/kernels/"+k.id+"?token="+k.key, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("DELETE kernel %s: %s", k.id, resp.Status)
	}
	return nil
}
