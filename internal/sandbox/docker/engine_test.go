package docker

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// The engine's parts that a real daemon does not easily exercise: frames
// split anyhow, daemons of other API versions, a proxy's error pages, TLS.
// The daemon tests (docker_test.go and the conformance suite) cover the rest.

// frame is one frame of an exec's multiplexed output.
func frame(stream byte, payload string) []byte {
	h := make([]byte, 8, 8+len(payload))
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

func frames(fs ...[]byte) []byte { return bytes.Join(fs, nil) }

func TestDemux(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 10<<10) // 160 KiB, five buffers' worth
	tests := []struct {
		name             string
		in               []byte
		reader           func(io.Reader) io.Reader
		stdout, stderr   string
		wantErr          error  // errors.Is
		wantErrSubstring string // or this in the error
	}{
		{name: "empty", in: nil},
		{
			name:   "interleaved",
			in:     frames(frame(1, "out 1\n"), frame(2, "err 1\n"), frame(1, "out 2\n")),
			stdout: "out 1\nout 2\n", stderr: "err 1\n",
		},
		{
			name:   "one byte a read",
			in:     frames(frame(1, "out"), frame(2, "err"), frame(1, ""), frame(1, "more")),
			reader: iotest.OneByteReader,
			stdout: "outmore", stderr: "err",
		},
		{
			name:   "frame larger than the buffer, read in halves",
			in:     frames(frame(1, big), frame(2, "after")),
			reader: iotest.HalfReader,
			stdout: big, stderr: "after",
		},
		{
			name:   "stdin frames go to stdout",
			in:     frame(0, "echo"),
			stdout: "echo",
		},
		{
			name:             "unknown stream",
			in:               frames(frame(1, "kept"), frame(7, "lost"), frame(1, "not reached")),
			stdout:           "kept",
			wantErrSubstring: "frame for stream 7",
		},
		{
			name:             "the daemon's error",
			in:               frames(frame(1, "kept"), frame(3, "exec failed: no such user\n")),
			stdout:           "kept",
			wantErrSubstring: "exec failed: no such user",
		},
		{
			name:    "frame cut short",
			in:      frame(1, "complete")[:8+4],
			stdout:  "comp",
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:    "header cut short",
			in:      frames(frame(2, "whole"), frame(1, "x")[:5]),
			stderr:  "whole",
			wantErr: io.ErrUnexpectedEOF,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tt.in)
			if tt.reader != nil {
				r = tt.reader(r)
			}
			var stdout, stderr bytes.Buffer
			err := demux(&stdout, &stderr, r)
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error %v, want %v", err, tt.wantErr)
			case tt.wantErrSubstring != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrSubstring)):
				t.Errorf("error %v, want one saying %q", err, tt.wantErrSubstring)
			case tt.wantErr == nil && tt.wantErrSubstring == "" && err != nil:
				t.Errorf("error %v", err)
			}
			if stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Errorf("stdout %.40q stderr %.40q, want %.40q and %.40q", stdout.String(), stderr.String(), tt.stdout, tt.stderr)
			}
		})
	}
}

// TestDemuxWriterError: a writer that fails stops the copy with its error.
func TestDemuxWriterError(t *testing.T) {
	full := errors.New("disk full")
	err := demux(failingWriter{full}, io.Discard, bytes.NewReader(frame(1, "x")))
	if !errors.Is(err, full) {
		t.Errorf("error %v, want the writer's", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// fakeDaemon serves h on a Unix socket, as dockerd does, and returns an
// engine configured with cfg (its Host set to the socket).
func fakeDaemon(t *testing.T, cfg engineConfig, h http.Handler) *engine {
	t.Helper()
	// Not t.TempDir: a socket's path has to fit in 108 bytes.
	dir, err := os.MkdirTemp("", "terp-engine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	cfg.Host = "unix://" + l.Addr().String()
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// daemonOf answers /_ping with API version api and GET /version with the
// version the request's path asked for, so the test sees which one terp
// used.
func daemonOf(api string, pings *int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_ping", func(w http.ResponseWriter, r *http.Request) {
		*pings++
		if api != "" {
			w.Header().Set("Api-Version", api)
		}
		io.WriteString(w, "OK")
	})
	mux.HandleFunc("GET /{version}/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"Version":"test","ApiVersion":"`+strings.TrimPrefix(r.PathValue("version"), "v")+`"}`)
	})
	return mux
}

func TestAPIVersionNegotiation(t *testing.T) {
	tests := []struct {
		name, daemon, fixed string
		want                string // the version of the request's path
		wantPings           int
		wantErr             string
	}{
		{name: "older daemon", daemon: "1.41", want: "1.41", wantPings: 1},
		{name: "newer daemon", daemon: "1.99", want: maxAPIVersion, wantPings: 1},
		{name: "daemon that does not say", daemon: "", want: maxAPIVersion, wantPings: 1},
		{name: "fixed by DOCKER_API_VERSION", daemon: "1.41", fixed: "1.43", want: "1.43", wantPings: 0},
		{name: "too old a daemon", daemon: "1.39", wantErr: "speaks API 1.39; terp needs 1.40", wantPings: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pings := 0
			e := fakeDaemon(t, engineConfig{APIVersion: tt.fixed}, daemonOf(tt.daemon, &pings))
			for range 2 {
				v, err := e.Version(testCtx(t))
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if v.APIVersion != tt.want || e.APIVersion() != tt.want {
					t.Errorf("requested API %s, APIVersion %s; want %s", v.APIVersion, e.APIVersion(), tt.want)
				}
			}
			if pings != tt.wantPings {
				t.Errorf("%d pings for two requests, want %d", pings, tt.wantPings)
			}
		})
	}
}

// TestDaemonErrors: the daemon's message reaches the user, and "not found"
// is told apart from the other refusals, whatever the body looks like.
func TestDaemonErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	mux.HandleFunc("GET /v1.41/volumes/{name}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("name") {
		case "missing":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"get missing: no such volume"}`+"\n")
		case "busy":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"message":"remove busy: volume is in use - [3f2a]"}`)
		case "proxied":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>\n")
		case "plain":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "404 page not found\n")
		case "silent":
			w.WriteHeader(http.StatusInternalServerError)
		case "huge":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, strings.Repeat("x", 1<<20))
		}
	})
	mux.HandleFunc("HEAD /v1.41/containers/{id}/archive", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") != "/work/here" {
			w.WriteHeader(http.StatusNotFound) // a HEAD has no body to say why
			return
		}
		st := base64.StdEncoding.EncodeToString([]byte(`{"name":"here","size":4096,"mode":2147484141,"mtime":"2024-01-01T00:00:00Z","linkTarget":""}`))
		w.Header().Set("X-Docker-Container-Path-Stat", st)
	})
	e := fakeDaemon(t, engineConfig{}, mux)

	tests := []struct {
		volume   string
		status   int
		notFound bool
		message  string
	}{
		{"missing", 404, true, "get missing: no such volume"},
		{"busy", 409, false, "remove busy: volume is in use - [3f2a]"},
		{"proxied", 502, false, "<html><body><h1>502 Bad Gateway</h1></body></html>"},
		{"plain", 404, true, "404 page not found"},
		{"silent", 500, false, "500 Internal Server Error for GET /v1.41/volumes/silent (does the daemon speak this API version?)"},
		{"huge", 500, false, strings.Repeat("x", 1<<10) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.volume, func(t *testing.T) {
			err := e.VolumeInspect(testCtx(t), tt.volume)
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T), want an *apiError", err, err)
			}
			if ae.Status != tt.status || ae.Message != tt.message {
				t.Errorf("status %d message %q, want %d %q", ae.Status, ae.Message, tt.status, tt.message)
			}
			if isNotFound(err) != tt.notFound {
				t.Errorf("isNotFound %v, want %v", isNotFound(err), tt.notFound)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("%q does not carry the daemon's message", err)
			}
		})
	}

	t.Run("stat", func(t *testing.T) {
		st, err := e.ContainerStatPath(testCtx(t), "c1", "/work/here")
		if err != nil {
			t.Fatal(err)
		}
		if st.Name != "here" || !st.Mode.IsDir() || st.Mode.Perm() != 0o755 {
			t.Errorf("stat %+v (mode %v), want the directory here, 0755", st, st.Mode)
		}
		if _, err := e.ContainerStatPath(testCtx(t), "c1", "/work/gone"); !isNotFound(err) {
			t.Errorf("stat of a missing path: %v, want not found", err)
		}
	})
}

// TestUnreachableDaemon: the user learns where terp looked and what to do.
func TestUnreachableDaemon(t *testing.T) {
	dir, err := os.MkdirTemp("", "terp-engine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	host := "unix://" + filepath.Join(dir, "docker.sock")
	t.Setenv("DOCKER_HOST", host)
	b, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Ping(testCtx(t))
	var se *SetupError
	if !errors.As(err, &se) {
		t.Fatalf("Ping: %v, want a *SetupError", err)
	}
	for _, want := range []string{"cannot reach the Docker daemon at " + host, "start it", "DOCKER_HOST"} {
		if !strings.Contains(se.Error(), want) {
			t.Errorf("%q does not say %q", se.Error(), want)
		}
	}
	if cause := se.Err.Error(); !strings.Contains(cause, "cannot connect to the Docker daemon at "+host) || !strings.Contains(cause, "no such file") {
		t.Errorf("cause %q, want where terp looked and what failed", cause)
	}
}

func TestEngineConfig(t *testing.T) {
	tests := []struct {
		cfg     engineConfig
		wantErr string
	}{
		{cfg: engineConfig{Host: "tcp://127.0.0.1:2375"}},
		{cfg: engineConfig{Host: "unix:///run/user/1000/docker.sock"}},
		{cfg: engineConfig{Host: "/var/run/docker.sock"}, wantErr: "is not an address"},
		{cfg: engineConfig{Host: "npipe:////./pipe/docker_engine"}, wantErr: "unix:// or tcp:// only"},
		{cfg: engineConfig{Host: "tcp://"}, wantErr: "is not an address"},
		{cfg: engineConfig{APIVersion: "latest"}, wantErr: "DOCKER_API_VERSION=latest"},
		{cfg: engineConfig{CertPath: "/nonexistent"}, wantErr: "DOCKER_CERT_PATH=/nonexistent"},
	}
	for _, tt := range tests {
		_, err := newEngine(tt.cfg)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v: error %v, want %q", tt.cfg, err, tt.wantErr)
		}
	}
}

// execDaemon answers POST /exec/{id}/start as dockerd does: 101, then the
// multiplexed output, here what it read on stdin until the client's
// CloseWrite, in frames written in pieces.
func execDaemon(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_ping", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Api-Version", "1.41") })
	mux.HandleFunc("POST /v1.41/exec/{id}/start", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "paused" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"message":"Container 3f2a is paused, unpause the container before exec"}`)
			return
		}
		if r.Header.Get("Upgrade") != "tcp" || r.Header.Get("Connection") != "Upgrade" {
			t.Errorf("exec start without the upgrade: %v", r.Header)
		}
		var start struct{ Detach, Tty *bool }
		if err := json.NewDecoder(r.Body).Decode(&start); err != nil || start.Detach == nil || *start.Detach || start.Tty == nil || *start.Tty {
			t.Errorf("exec start body %+v (%v), want Detach and Tty false", start, err)
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		// The answer and the first frame in one write: the client must
		// not lose what it buffered with the answer.
		rw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		rw.Write(frame(2, "started\n"))
		rw.Flush()
		in, err := io.ReadAll(rw)
		if err != nil {
			t.Error(err)
			return
		}
		out := frames(frame(1, "got "), frame(1, string(in)), frame(2, "done\n"))
		for len(out) > 0 { // in pieces that cut headers and payloads
			n := min(5, len(out))
			conn.Write(out[:n])
			out = out[n:]
			time.Sleep(time.Millisecond)
		}
	})
	return mux
}

func TestExecAttach(t *testing.T) {
	e := fakeDaemon(t, engineConfig{}, execDaemon(t))
	checkExecStream(t, e)

	_, err := e.ExecAttach(testCtx(t), "paused")
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(err.Error(), "is paused") {
		t.Errorf("exec start refused: %v, want the daemon's 409 and message", err)
	}
}

// checkExecStream sends stdin on an exec's stream, ends it, and checks that
// the output comes back whole.
func checkExecStream(t *testing.T, e *engine) {
	t.Helper()
	s, err := e.ExecAttach(testCtx(t), "e1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := io.WriteString(s, "hello, stdin"); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := demux(&stdout, &stderr, s); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "got hello, stdin" || stderr.String() != "started\ndone\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

// TestTLS: with DOCKER_CERT_PATH and DOCKER_TLS_VERIFY, terp checks the
// daemon against ca.pem and shows it cert.pem, for requests and for an
// exec's hijacked connection alike.
func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(execDaemon(t))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", srv.Certificate().Raw)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "terp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "cert.pem"), "CERTIFICATE", der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "key.pem"), "EC PRIVATE KEY", kder)

	host := "tcp://" + srv.Listener.Addr().String()
	e, err := newEngine(engineConfig{Host: host, CertPath: dir, TLSVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	checkExecStream(t, e)

	// Without the CA, the daemon's certificate is refused; without TLS,
	// the user is told the daemon speaks it.
	other := t.TempDir()
	writePEM(t, filepath.Join(other, "ca.pem"), "CERTIFICATE", der)
	for _, name := range []string{"cert.pem", "key.pem"} {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		os.WriteFile(filepath.Join(other, name), data, 0o600)
	}
	e, err = newEngine(engineConfig{Host: host, CertPath: other, TLSVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ping(testCtx(t)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a daemon not signed by ca.pem: %v, want a certificate error", err)
	}
	// A daemon that takes only certificates of its own CA (--tlsverify).
	strict := httptest.NewUnstartedServer(execDaemon(t))
	strict.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: x509.NewCertPool()}
	strict.Config.ErrorLog = log.New(io.Discard, "", 0)
	strict.StartTLS()
	t.Cleanup(strict.Close)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", strict.Certificate().Raw)
	e, err = newEngine(engineConfig{Host: "tcp://" + strict.Listener.Addr().String(), CertPath: dir, TLSVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ping(testCtx(t)); err == nil || !strings.Contains(err.Error(), "refuses terp's client certificate") {
		t.Errorf("a daemon that refuses the client certificate: %v, want a hint at cert.pem", err)
	}

	// dockerd, a Go server, answers plain HTTP itself.
	e, err = newEngine(engineConfig{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ping(testCtx(t)); err == nil || !strings.Contains(err.Error(), "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to a TLS daemon: %v, want the daemon's word on it", err)
	}
}

// TestPlainHTTPToTLSProxy: a TLS endpoint that answers plain HTTP with a TLS
// alert (a proxy in front of the daemon, say) gets a hint at the TLS
// variables.
func TestPlainHTTPToTLSProxy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			// What a TLS server does with a request in plain text: it
			// reads it as a handshake, and sends an alert.
			go func() {
				defer conn.Close()
				if _, err := conn.Read(make([]byte, 512)); err == nil {
					conn.Write([]byte("\x15\x03\x01\x00\x02\x02\x46")) // alert: protocol version
				}
			}()
		}
	}()
	e, err := newEngine(engineConfig{Host: "tcp://" + l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ping(testCtx(t)); err == nil || !strings.Contains(err.Error(), "DOCKER_CERT_PATH") {
		t.Errorf("plain HTTP to a TLS endpoint: %v, want a hint at DOCKER_CERT_PATH", err)
	}
}

func writePEM(t *testing.T, name, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
