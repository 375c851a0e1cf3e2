package jupyter

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// peerPython runs the stock Jupyter Server the round trip is measured
// against: Debian's, with its ipykernel.
const peerPython = "/usr/bin/python3"

// BenchmarkExecuteRoundTrip times one execute_request through a kernel's
// websocket until its execute_reply and its status idle, as Open WebUI
// waits for them: on terp serve (the local sandbox, kernel mode, the real
// HTTP server and websocket) and on a stock Jupyter Server with ipykernel
// on this machine, unsandboxed. The same Go client speaks to both, over
// the legacy JSON format. Each iteration runs the cell once on each side,
// in turn; the metrics are terp-ms/exec, jupyter-ms/exec and their ratio.
func BenchmarkExecuteRoundTrip(b *testing.B) {
	for _, cell := range []struct{ name, code string }{{"assign", "x = 1"}, {"print", "print(1)"}} {
		b.Run(cell.name, func(b *testing.B) {
			terp := terpSide(b)
			peer := jupyterSide(b)
			for _, s := range []*benchSide{terp, peer} {
				s.execute(b, "y = 0") // warm: the first cell pays the kernel's start
			}
			var tt, jt time.Duration
			b.ResetTimer()
			for i := range b.N {
				sides := []*benchSide{terp, peer}
				if i%2 == 1 {
					sides[0], sides[1] = peer, terp
				}
				for _, s := range sides {
					start := time.Now()
					s.execute(b, cell.code)
					if s == terp {
						tt += time.Since(start)
					} else {
						jt += time.Since(start)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(tt.Microseconds())/1000/float64(b.N), "terp-ms/exec")
			b.ReportMetric(float64(jt.Microseconds())/1000/float64(b.N), "jupyter-ms/exec")
			b.ReportMetric(float64(jt)/float64(tt), "jupyter/terp")
		})
	}
}

// benchSide is one server's kernel and a websocket to it.
type benchSide struct{ c *client }

func (s *benchSide) execute(b *testing.B, code string) {
	rs := s.c.execute(code)
	if r := of(rs, "execute_reply"); len(r) != 1 || r[0].Content["status"] != "ok" {
		b.Fatalf("%q: %+v", code, rs)
	}
}

func terpSide(b *testing.B) *benchSide {
	ts := newTestServer(b)
	var k kernelModel
	if status := ts.call(b, "POST", "/api/kernels", aliceKey, "", &k); status != http.StatusCreated {
		b.Fatalf("POST /api/kernels: %d", status)
	}
	c, _, err := ts.connect(b, k.ID, aliceKey)
	if err != nil {
		b.Fatal(err)
	}
	return &benchSide{c: c}
}

// jupyterSide starts a stock Jupyter Server with a kernel, or skips the
// benchmark, saying so, when this machine has none.
func jupyterSide(b *testing.B) *benchSide {
	if err := exec.Command(peerPython, "-c", "import jupyter_server, ipykernel").Run(); err != nil {
		msg := "JUPYTER BENCHMARK SKIPPED: no stock Jupyter Server to compare with; run `sudo apt-get install python3-jupyter-server python3-ipykernel`"
		fmt.Fprintln(os.Stderr, msg)
		b.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	const token = "bench-token"
	dir := b.TempDir()
	cmd := exec.Command(peerPython, "-m", "jupyter_server", "--no-browser", fmt.Sprintf("--port=%d", port), "--ip=127.0.0.1",
		"--ServerApp.token="+token, "--ServerApp.root_dir="+dir, "--allow-root")
	cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+dir, "JUPYTER_DATA_DIR="+dir, "JUPYTER_CONFIG_DIR="+dir)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/api"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the stock Jupyter Server did not start within a minute")
		}
	}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", base+"/api/kernels?token="+token, strings.NewReader(`{"name": "python3"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var k kernelModel
	err = json.NewDecoder(resp.Body).Decode(&k)
	resp.Body.Close()
	if err != nil || k.ID == "" {
		b.Fatalf("starting a stock kernel: %v, %+v", err, k)
	}
	ws, wresp, err := websocket.Dial(ctx(b), "ws://127.0.0.1:"+fmt.Sprint(port)+"/api/kernels/"+k.ID+"/channels?token="+token, nil)
	if wresp != nil && wresp.Body != nil {
		wresp.Body.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	b.Cleanup(func() { _ = ws.CloseNow() })
	return &benchSide{c: &client{t: b, ws: ws, session: newUUID()}}
}
