package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowServer is serveHTTP, as both servers run it, with timeouts short
// enough to pass in a test, in front of a handler that reads the body and
// then answers with lines, one every 100 ms, for as many as ?lines= says.
func slowServer(t *testing.T) (addr string, timeouts httpTimeouts) {
	t.Helper()
	timeouts = httpTimeouts{header: 300 * time.Millisecond, body: 300 * time.Millisecond, idle: 300 * time.Millisecond}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, "the body came too slowly: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		fmt.Fprintf(w, "read %d bytes\n", n)
		var lines int
		fmt.Sscan(r.URL.Query().Get("lines"), &lines)
		for i := range lines {
			time.Sleep(100 * time.Millisecond)
			if r.Context().Err() != nil {
				return // cancelled under the stream: the client sees it cut short
			}
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveHTTP(ctx, ln, h, time.Second, nil, timeouts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String(), timeouts
}

// cutOff sends start on a raw connection, then trickle every 50 ms for as
// long as the server keeps the connection, and returns what it answered
// and how long it took to close the connection.
func cutOff(t *testing.T, addr, start, trickle string) (string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	if _, err := io.WriteString(conn, start); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	if trickle != "" {
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := io.WriteString(conn, trickle); err != nil {
					return
				}
			}
		}()
	}
	// Generous: the test proves that a timeout fires, not how soon.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("the server never closed the connection: %v (read %q)", err, got)
	}
	return string(got), time.Since(began)
}

// A client that trickles its headers, trickles its body, or holds a kept
// connection idle is cut off soon after the timeout, while a normal client
// of the same server is served; an answer that streams for far longer than
// every timeout is not cut.
func TestServeCutsOffSlowClients(t *testing.T) {
	addr, timeouts := slowServer(t)
	// A connection per request: one kept idle past the idle timeout would
	// be closed under the next request, a race of the test's own.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	normal := func() {
		t.Helper()
		resp, err := client.Post("http://"+addr+"/", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatalf("a normal client beside the slow one: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "read 5 bytes\n" {
			t.Errorf("a normal client beside the slow one got %q", b)
		}
	}
	bound := 10 * timeouts.header

	t.Run("headers trickled", func(t *testing.T) {
		done := make(chan struct{})
		var got string
		var took time.Duration
		go func() {
			defer close(done)
			got, took = cutOff(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n", "X-Slow: 1\r\n")
		}()
		normal()
		<-done
		if took > bound || strings.Contains(got, "200 OK") {
			t.Errorf("headers trickled: closed after %v (want well within %v), answered %q", took, bound, got)
		}
	})
	t.Run("body trickled", func(t *testing.T) {
		done := make(chan struct{})
		var got string
		var took time.Duration
		go func() {
			defer close(done)
			got, took = cutOff(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", "x")
		}()
		normal()
		<-done
		if took > bound || !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Errorf("body trickled: closed after %v (want well within %v), answered %q", took, bound, got)
		}
	})
	t.Run("kept idle", func(t *testing.T) {
		got, took := cutOff(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "")
		if took > bound || !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Errorf("kept idle: closed after %v (want well within %v), answered %q", took, bound, got)
		}
	})
	t.Run("body steady though long", func(t *testing.T) {
		// 64 KiB/s, twice the slowest allowed, for twice the timeout and more.
		pr, pw := io.Pipe()
		go func() {
			chunk := bytes.Repeat([]byte("x"), 6400)
			for range 10 {
				time.Sleep(100 * time.Millisecond)
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			pw.Close()
		}()
		resp, err := client.Post("http://"+addr+"/", "text/plain", pr)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "read 64000 bytes\n" {
			t.Errorf("a body that came steadily for 1 s: %s %q", resp.Status, b)
		}
	})
	t.Run("long answer", func(t *testing.T) {
		// 15 lines, 1.5 s: five times every timeout.
		resp, err := client.Post("http://"+addr+"/?lines=15", "application/json", strings.NewReader(`{"stream": true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		lines := 0
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "line ") {
				lines++
			}
		}
		if lines != 15 {
			t.Errorf("the stream was cut after %d lines of 15", lines)
		}
	})
}
