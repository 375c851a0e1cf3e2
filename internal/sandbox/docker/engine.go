package docker

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// terp speaks the Docker Engine API itself, over HTTP on the daemon's socket.
// The maintained Go client (github.com/moby/moby/client) costs every terp
// command, `terp version` included, more than half a millisecond of package
// initialisation, for image-reference regular expressions and tracing that
// the backend never uses.
//
// This file is the whole of what terp assumes of the API: the endpoints the
// backend calls, and only the fields it sends and reads, named as the
// Engine API reference names them (api/swagger.yaml in github.com/moby/moby;
// they are the same from API 1.40 to 1.56). What it does not send, the
// daemon takes as its default. The tests check the result through the moby
// client, against the real daemon.
//
// It reads the environment as the moby client's FromEnv did: DOCKER_HOST
// (unix:// or tcp://, the local socket when unset), DOCKER_CERT_PATH (TLS,
// with the certificates ca.pem, cert.pem and key.pem in that directory;
// DOCKER_TLS_VERIFY alone turns nothing on) and DOCKER_TLS_VERIFY (check
// the daemon's certificate), and DOCKER_API_VERSION, which fixes the API
// version instead of negotiating one with the daemon on the first request.

// The API versions terp speaks: from Docker 19.03's, the oldest the moby
// client took when terp used it, to the newest reference this file was
// checked against. A daemon newer than that still answers maxAPIVersion.
const (
	minAPIVersion = "1.40"
	maxAPIVersion = "1.56"
	defaultHost   = "unix:///var/run/docker.sock"
)

// Container states, as GET /containers/json reports them.
const (
	stateRunning = "running"
	statePaused  = "paused"
)

// engineConfig says which daemon to talk to and how. engineConfigFromEnv
// reads it from the environment.
type engineConfig struct {
	Host       string // DOCKER_HOST; empty means defaultHost
	CertPath   string // DOCKER_CERT_PATH: TLS, with ca.pem, cert.pem and key.pem
	TLSVerify  bool   // DOCKER_TLS_VERIFY: check the daemon's certificate against ca.pem
	APIVersion string // DOCKER_API_VERSION: fixed, instead of negotiated with the daemon
}

func engineConfigFromEnv() engineConfig {
	return engineConfig{
		Host:       cmp.Or(os.Getenv("DOCKER_HOST"), defaultHost),
		CertPath:   os.Getenv("DOCKER_CERT_PATH"),
		TLSVerify:  os.Getenv("DOCKER_TLS_VERIFY") != "",
		APIVersion: strings.TrimPrefix(strings.TrimSpace(os.Getenv("DOCKER_API_VERSION")), "v"),
	}
}

// engine is a client for the Engine API with one method per call the
// backend makes. It is safe for concurrent use.
type engine struct {
	host     string // as configured, e.g. unix:///var/run/docker.sock
	network  string // what to dial: "unix" or "tcp"
	addr     string // a socket's path, or host:port
	basePath string // a tcp:// host's path, put before every API path
	scheme   string // http, or https with TLS
	tls      *tls.Config
	http     *http.Client

	mu      sync.Mutex // held while the version is negotiated
	version string     // in every API path (/v1.41/...); empty until negotiated
}

// dialTimeout bounds connecting to the daemon, as the docker command does.
const dialTimeout = 10 * time.Second

// newEngine checks cfg and builds the client. It does not talk to the
// daemon.
func newEngine(cfg engineConfig) (*engine, error) {
	host := cmp.Or(cfg.Host, defaultHost)
	proto, addr, ok := strings.Cut(host, "://")
	if !ok || addr == "" {
		return nil, fmt.Errorf("DOCKER_HOST=%s is not an address such as unix:///var/run/docker.sock or tcp://host:2376", host)
	}
	e := &engine{host: host, network: proto, addr: addr, scheme: "http"}
	switch proto {
	case "unix":
	case "tcp":
		u, err := url.Parse(host)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("DOCKER_HOST=%s is not a tcp://host:port address", host)
		}
		e.addr, e.basePath = u.Host, strings.TrimSuffix(u.Path, "/")
	default:
		return nil, fmt.Errorf("DOCKER_HOST=%s: terp reaches a daemon through unix:// or tcp:// only", host)
	}
	if cfg.APIVersion != "" {
		v, err := parseAPIVersion(cfg.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("DOCKER_API_VERSION=%s: %w", cfg.APIVersion, err)
		}
		e.version = v
	}
	if cfg.CertPath != "" {
		t, err := tlsConfig(cfg.CertPath, cfg.TLSVerify)
		if err != nil {
			return nil, fmt.Errorf("configure TLS from DOCKER_CERT_PATH=%s: %w", cfg.CertPath, err)
		}
		e.tls, e.scheme = t, "https"
	}

	dialer := &net.Dialer{Timeout: dialTimeout}
	tr := &http.Transport{
		MaxIdleConns:    6,
		IdleConnTimeout: 30 * time.Second,
		TLSClientConfig: e.tls,
	}
	if e.network == "unix" {
		tr.DisableCompression = true
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", e.addr)
		}
	} else {
		tr.Proxy = http.ProxyFromEnvironment
		tr.DialContext = dialer.DialContext
	}
	e.http = &http.Client{
		Transport: tr,
		// The daemon does not redirect; a redirect's response is its answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return e, nil
}

// tlsConfig is the docker command's TLS: the client certificate in dir,
// and, when verify is set, the daemon's checked against dir's ca.pem (and
// the system's roots).
func tlsConfig(dir string, verify bool) (*tls.Config, error) {
	t := &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		// Without DOCKER_TLS_VERIFY the connection is encrypted but the
		// daemon is whoever answers, as with the docker command.
		InsecureSkipVerify: !verify,
	}
	if verify {
		pool, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("read the system's certificates: %w", err)
		}
		ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(dir, "ca.pem"))
		}
		t.RootCAs = pool
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		return nil, fmt.Errorf("load the client certificate: %w", err)
	}
	t.Certificates = []tls.Certificate{cert}
	return t, nil
}

// parseAPIVersion reads MAJOR.MINOR.
func parseAPIVersion(v string) (string, error) {
	major, minor, err := splitAPIVersion(v)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", major, minor), nil
}

func splitAPIVersion(v string) (major, minor int, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(v), ".")
	if ok {
		if major, err = strconv.Atoi(a); err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("API version %q is not MAJOR.MINOR, such as 1.41", v)
	}
	return major, minor, nil
}

// olderAPI reports whether API version a is older than b; both are valid.
func olderAPI(a, b string) bool {
	amaj, amin, _ := splitAPIVersion(a)
	bmaj, bmin, _ := splitAPIVersion(b)
	return amaj < bmaj || amaj == bmaj && amin < bmin
}

// Host is the daemon's address, as configured.
func (e *engine) Host() string { return e.host }

// APIVersion is the version terp speaks: the one negotiated (or fixed by
// DOCKER_API_VERSION), or "" before the first request.
func (e *engine) APIVersion() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.version
}

// Ping reaches the daemon, and negotiates the API version on its first
// success: the daemon's, capped at maxAPIVersion.
func (e *engine) Ping(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ping(ctx)
}

// ping is Ping with e.mu held.
func (e *engine) ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url(e.basePath+"/_ping", nil), nil)
	if err != nil {
		return err
	}
	resp, err := e.send(req)
	if err != nil {
		return err
	}
	drain(resp)
	if e.version != "" {
		return nil
	}
	v := resp.Header.Get("Api-Version")
	if v == "" {
		e.version = maxAPIVersion
		return nil
	}
	if v, err = parseAPIVersion(v); err != nil {
		return fmt.Errorf("the daemon at %s: %w", e.host, err)
	}
	if olderAPI(v, minAPIVersion) {
		return fmt.Errorf("the daemon at %s speaks API %s; terp needs %s or later (Docker 19.03)", e.host, v, minAPIVersion)
	}
	if olderAPI(v, maxAPIVersion) {
		e.version = v
	} else {
		e.version = maxAPIVersion
	}
	return nil
}

// apiPath is p under the negotiated API version, negotiating it first.
func (e *engine) apiPath(ctx context.Context, p string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.version == "" {
		if err := e.ping(ctx); err != nil {
			return "", err
		}
	}
	return e.basePath + "/v" + e.version + p, nil
}

// url is the address of API path p (version included) with query. p is
// escaped here: ids and names go into it as they are.
func (e *engine) url(p string, query url.Values) string {
	u := url.URL{Scheme: e.scheme, Host: e.addr, Path: p, RawQuery: query.Encode()}
	if e.network == "unix" {
		u.Host = "docker" // any name: the socket is dialled
	}
	return u.String()
}

// request sends method to API path p and returns the response if the daemon
// accepted the request. Its error is the daemon's answer as an *apiError, or
// why the daemon could not be reached. body, unless nil, is sent as JSON,
// or as it is when it is an io.Reader: a tar archive, the one raw body the
// API takes.
func (e *engine) request(ctx context.Context, method, p string, query url.Values, body any) (*http.Response, error) {
	p, err := e.apiPath(ctx, p)
	if err != nil {
		return nil, err
	}
	var r io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r, contentType = b, "application/x-tar"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		r, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url(p, query), r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return e.send(req)
}

// call is request for the endpoints that answer JSON (decoded into out,
// unless it is nil) or nothing.
func (e *engine) call(ctx context.Context, method, p string, query url.Values, in, out any) error {
	resp, err := e.request(ctx, method, p, query, in)
	if err != nil {
		return err
	}
	defer drain(resp)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the daemon's answer: %w", method, p, err)
	}
	return nil
}

// send does req and turns a status of 400 or more into an *apiError.
func (e *engine) send(req *http.Request) (*http.Response, error) {
	req.Header.Set("User-Agent", "terp")
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, e.connError(err)
	}
	if resp.StatusCode >= http.StatusBadRequest {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// drain reads what is left of a small answer, so that its connection can
// serve the next request, and closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

// connError says that the daemon could not be reached, with a hint for the
// usual mistakes with TLS.
func (e *engine) connError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := err.Error()
	switch {
	case e.tls == nil && strings.Contains(msg, "malformed HTTP response"):
		return fmt.Errorf("cannot connect to the Docker daemon at %s: it seems to speak TLS; set DOCKER_CERT_PATH to the directory of its certificates (and DOCKER_TLS_VERIFY=1): %w", e.host, err)
	case e.tls != nil && strings.Contains(msg, "remote error: tls:"):
		// An alert from the daemon: bad certificate, unknown certificate
		// authority, certificate required...
		return fmt.Errorf("cannot connect to the Docker daemon at %s: it refuses terp's client certificate; check cert.pem and key.pem in DOCKER_CERT_PATH: %w", e.host, err)
	}
	return fmt.Errorf("cannot connect to the Docker daemon at %s: %w", e.host, err)
}

// apiError is the daemon's refusal of a request: its HTTP status and its
// message, e.g. 404 "No such container: 3f2a".
type apiError struct {
	Status  int
	Message string
}

// The wording is the docker command's, which users search for.
func (e *apiError) Error() string { return "Error response from daemon: " + e.Message }

// isNotFound reports whether the daemon answered 404: no such container,
// volume, image, exec or path.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// readAPIError reads the daemon's answer to a failed request: JSON
// {"message": "..."}, or from a proxy in between, text or HTML, which is
// kept as it is, up to a length a reader can take.
func readAPIError(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("the daemon answered %s, and the message could not be read: %w", resp.Status, err)
	}
	var m struct {
		Message string `json:"message"`
	}
	msg := string(body)
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		msg = m.Message
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = fmt.Sprintf("%s for %s %s (does the daemon speak this API version?)", cmp.Or(resp.Status, strconv.Itoa(resp.StatusCode)), resp.Request.Method, resp.Request.URL.Path)
	}
	if len(msg) > 1<<10 {
		msg = strings.ToValidUTF8(msg[:1<<10], "") + "…"
	}
	return &apiError{Status: resp.StatusCode, Message: msg}
}

// labelFilter asks the list endpoints for objects with a label, given as
// KEY or KEY=VALUE.
func labelFilter(label string) url.Values {
	f, _ := json.Marshal(map[string]map[string]bool{"label": {label: true}})
	return url.Values{"filters": {string(f)}}
}

// daemonVersion is GET /version's answer.
type daemonVersion struct {
	Version    string `json:"Version"`
	APIVersion string `json:"ApiVersion"`
}

func (e *engine) Version(ctx context.Context) (daemonVersion, error) {
	var v daemonVersion
	return v, e.call(ctx, http.MethodGet, "/version", nil, nil, &v)
}

// daemonInfo is the part of GET /info's answer terp reads.
type daemonInfo struct {
	NCPU            int      `json:"NCPU"`
	SecurityOptions []string `json:"SecurityOptions"`
}

func (e *engine) Info(ctx context.Context) (daemonInfo, error) {
	var info daemonInfo
	return info, e.call(ctx, http.MethodGet, "/info", nil, nil, &info)
}

// ImageInspect makes sure the image is on the daemon's host.
func (e *engine) ImageInspect(ctx context.Context, image string) error {
	// A reference keeps its slashes (registry/name:tag): the daemon's
	// route takes the rest of the path as the name.
	return e.call(ctx, http.MethodGet, "/images/"+image+"/json", nil, nil, nil)
}

// volume is the part of a volume terp reads.
type volume struct {
	Name   string            `json:"Name"`
	Labels map[string]string `json:"Labels"`
}

func (e *engine) VolumeCreate(ctx context.Context, name string, labels map[string]string) error {
	return e.call(ctx, http.MethodPost, "/volumes/create", nil, volume{Name: name, Labels: labels}, nil)
}

func (e *engine) VolumeInspect(ctx context.Context, name string) error {
	return e.call(ctx, http.MethodGet, "/volumes/"+name, nil, nil, nil)
}

// VolumeList returns the volumes with label (KEY or KEY=VALUE).
func (e *engine) VolumeList(ctx context.Context, label string) ([]volume, error) {
	var list struct {
		Volumes []volume `json:"Volumes"`
	}
	return list.Volumes, e.call(ctx, http.MethodGet, "/volumes", labelFilter(label), nil, &list)
}

// VolumeRemove removes a volume; force is `docker volume rm --force`'s.
func (e *engine) VolumeRemove(ctx context.Context, name string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"1"}}
	}
	return e.call(ctx, http.MethodDelete, "/volumes/"+name, q, nil, nil)
}

// containerCreate is the body of POST /containers/create: the container's
// configuration, with HostConfig beside it.
type containerCreate struct {
	Image      string            `json:"Image"`
	User       string            `json:"User,omitempty"`
	Hostname   string            `json:"Hostname,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	HostConfig hostConfig        `json:"HostConfig"`
}

// hostConfig is the part of HostConfig terp sets. The resources (Memory
// to Ulimits) sit in it, not in an object of their own.
type hostConfig struct {
	NetworkMode    string            `json:"NetworkMode,omitempty"` // empty: the daemon's default network
	Mounts         []mount           `json:"Mounts,omitempty"`
	ReadonlyRootfs bool              `json:"ReadonlyRootfs"`
	Tmpfs          map[string]string `json:"Tmpfs,omitempty"`
	CapDrop        []string          `json:"CapDrop,omitempty"`
	SecurityOpt    []string          `json:"SecurityOpt,omitempty"`
	Init           bool              `json:"Init"`
	LogConfig      logConfig         `json:"LogConfig"`
	Memory         int64             `json:"Memory,omitempty"`
	MemorySwap     int64             `json:"MemorySwap,omitempty"`
	PidsLimit      int64             `json:"PidsLimit,omitempty"`
	NanoCPUs       int64             `json:"NanoCpus,omitempty"`
	Ulimits        []ulimit          `json:"Ulimits,omitempty"`
}

type logConfig struct {
	Type string `json:"Type"`
}

type ulimit struct {
	Name string `json:"Name"`
	Soft int64  `json:"Soft"`
	Hard int64  `json:"Hard"`
}

// mount is one of HostConfig.Mounts: a volume or a bind mount.
type mount struct {
	Type          string         `json:"Type"` // "volume" or "bind"
	Source        string         `json:"Source"`
	Target        string         `json:"Target"`
	ReadOnly      bool           `json:"ReadOnly,omitempty"`
	VolumeOptions *volumeOptions `json:"VolumeOptions,omitempty"`
}

type volumeOptions struct {
	NoCopy bool `json:"NoCopy,omitempty"` // leave the image's files at the target out of a new volume
}

// ContainerCreate creates a container called name and returns its id.
func (e *engine) ContainerCreate(ctx context.Context, name string, c containerCreate) (string, error) {
	var created struct {
		ID string `json:"Id"`
	}
	err := e.call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, c, &created)
	return created.ID, err
}

// ContainerStart starts a container; one already running is not an error
// (the daemon answers 304).
func (e *engine) ContainerStart(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+id+"/start", nil, nil, nil)
}

// containerSummary is the part of GET /containers/json's entries terp reads.
type containerSummary struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"` // with a leading slash
	Labels map[string]string `json:"Labels"`
	State  string            `json:"State"` // stateRunning, statePaused, "exited"...
}

// ContainerList returns every container, running or not, with label (KEY
// or KEY=VALUE).
func (e *engine) ContainerList(ctx context.Context, label string) ([]containerSummary, error) {
	q := labelFilter(label)
	q.Set("all", "1")
	var list []containerSummary
	return list, e.call(ctx, http.MethodGet, "/containers/json", q, nil, &list)
}

// ContainerPaused inspects a container and reports whether it is paused.
func (e *engine) ContainerPaused(ctx context.Context, id string) (bool, error) {
	var c struct {
		State struct {
			Paused bool `json:"Paused"`
		} `json:"State"`
	}
	err := e.call(ctx, http.MethodGet, "/containers/"+id+"/json", nil, nil, &c)
	return c.State.Paused, err
}

func (e *engine) ContainerPause(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+id+"/pause", nil, nil, nil)
}

func (e *engine) ContainerUnpause(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+id+"/unpause", nil, nil, nil)
}

func (e *engine) ContainerRename(ctx context.Context, id, name string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+id+"/rename", url.Values{"name": {name}}, nil, nil)
}

// ContainerRemove removes a container, killing it if it runs.
func (e *engine) ContainerRemove(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodDelete, "/containers/"+id, url.Values{"force": {"1"}}, nil, nil)
}

// pathStat describes a path in a container; the daemon sends it, as JSON in
// base64, in the X-Docker-Container-Path-Stat header of the archive
// endpoint.
type pathStat struct {
	Name       string      `json:"name"`
	Size       int64       `json:"size"`
	Mode       fs.FileMode `json:"mode"` // Go's bits: fs.ModeDir, fs.ModeSymlink...
	LinkTarget string      `json:"linkTarget"`
}

// ContainerStatPath describes path in a container without copying it.
func (e *engine) ContainerStatPath(ctx context.Context, id, p string) (pathStat, error) {
	resp, err := e.request(ctx, http.MethodHead, "/containers/"+id+"/archive", url.Values{"path": {p}}, nil)
	if err != nil {
		return pathStat{}, err
	}
	drain(resp)
	var st pathStat
	hdr := resp.Header.Get("X-Docker-Container-Path-Stat")
	if err := json.NewDecoder(base64.NewDecoder(base64.StdEncoding, strings.NewReader(hdr))).Decode(&st); err != nil {
		return pathStat{}, fmt.Errorf("stat %s: the daemon's X-Docker-Container-Path-Stat %q: %w", p, hdr, err)
	}
	return st, nil
}

// CopyToContainer unpacks the tar archive r into directory dir of a
// container. A directory in the archive never replaces a file, nor a file a
// directory.
func (e *engine) CopyToContainer(ctx context.Context, id, dir string, r io.Reader) error {
	q := url.Values{"path": {dir}, "noOverwriteDirNonDir": {"true"}}
	return e.call(ctx, http.MethodPut, "/containers/"+id+"/archive", q, r, nil)
}

// CopyFromContainer returns a tar archive of path p in a container. The
// caller closes it.
func (e *engine) CopyFromContainer(ctx context.Context, id, p string) (io.ReadCloser, error) {
	resp, err := e.request(ctx, http.MethodGet, "/containers/"+id+"/archive", url.Values{"path": {p}}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// execConfig is the body of POST /containers/{id}/exec. Without a TTY the
// output comes multiplexed (see demux).
type execConfig struct {
	User         string   `json:"User,omitempty"`
	AttachStdin  bool     `json:"AttachStdin"`
	AttachStdout bool     `json:"AttachStdout"`
	AttachStderr bool     `json:"AttachStderr"`
	Env          []string `json:"Env,omitempty"`
	WorkingDir   string   `json:"WorkingDir,omitempty"`
	Cmd          []string `json:"Cmd"`
}

// ExecCreate sets up a command in a container and returns the exec's id.
func (e *engine) ExecCreate(ctx context.Context, containerID string, c execConfig) (string, error) {
	var created struct {
		ID string `json:"Id"`
	}
	err := e.call(ctx, http.MethodPost, "/containers/"+containerID+"/exec", nil, c, &created)
	return created.ID, err
}

// execState is the part of GET /exec/{id}/json's answer terp reads.
type execState struct {
	Running  bool `json:"Running"`
	ExitCode int  `json:"ExitCode"` // null while it runs
}

func (e *engine) ExecInspect(ctx context.Context, execID string) (execState, error) {
	var st execState
	return st, e.call(ctx, http.MethodGet, "/exec/"+execID+"/json", nil, nil, &st)
}

// ExecAttach starts an exec and returns the connection it then runs on: its
// stdin goes one way, its multiplexed stdout and stderr come back. The HTTP
// connection is hijacked (Upgrade: tcp), so this dials one of its own. ctx
// bounds the start only; the caller closes the stream.
func (e *engine) ExecAttach(ctx context.Context, execID string) (*stream, error) {
	p, err := e.apiPath(ctx, "/exec/"+execID+"/start")
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(struct {
		Detach bool `json:"Detach"`
		Tty    bool `json:"Tty"`
	}{})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url(p, nil), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "terp")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")

	conn, err := e.dial(ctx)
	if err != nil {
		return nil, e.connError(err)
	}
	// Closing the connection is what ends a write or read in progress.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	s, err := upgrade(conn, req)
	if !stop() {
		_ = conn.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		_ = conn.Close()
		var ae *apiError
		if !errors.As(err, &ae) {
			err = e.connError(err)
		}
		return nil, err
	}
	return s, nil
}

// dial connects to the daemon the way its HTTP client does, TLS included.
func (e *engine) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, e.network, e.addr)
	if err != nil || e.tls == nil {
		return conn, err
	}
	t := e.tls.Clone()
	if t.ServerName == "" {
		t.ServerName, _, _ = net.SplitHostPort(e.addr)
	}
	tc := tls.Client(conn, t)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

// upgrade sends req on conn and reads the daemon's answer: 101 Switching
// Protocols (or 200 OK from daemons that switch without saying so), after
// which conn carries the exec's streams.
func upgrade(conn net.Conn, req *http.Request) (*stream, error) {
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusSwitchingProtocols, http.StatusOK:
		// The body is the stream itself, read through br, which may hold
		// its start already: closing resp.Body would read it to the end.
		return &stream{conn: conn, r: br}, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode < http.StatusBadRequest {
		return nil, fmt.Errorf("the daemon answered %s to %s, not 101 Switching Protocols", resp.Status, req.URL.Path)
	}
	return nil, readAPIError(resp)
}

// stream is an exec's hijacked connection.
type stream struct {
	conn net.Conn
	r    *bufio.Reader // conn's, holding what came with the daemon's answer
}

func (s *stream) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *stream) Write(p []byte) (int, error) { return s.conn.Write(p) }

// CloseWrite ends the exec's stdin: the command reads end of file, and the
// output keeps coming.
func (s *stream) CloseWrite() error {
	if cw, ok := s.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close cuts the connection, which ends a read in progress. There is
// nothing to do about an error.
func (s *stream) Close() { _ = s.conn.Close() }

// demux copies an exec's multiplexed output into stdout and stderr until it
// ends. The output is a series of frames: an 8-byte header, the stream in
// its first byte (0 stdin, 1 stdout, 2 stderr, 3 an error from the daemon)
// and the length, big-endian, in its last four, then that many bytes. A
// frame cut short is io.ErrUnexpectedEOF; the daemon's error is returned as
// one.
func demux(stdout, stderr io.Writer, r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		if _, err := io.ReadFull(r, buf[:8]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		var w io.Writer
		kind, n := buf[0], binary.BigEndian.Uint32(buf[4:8])
		switch kind {
		case 0, 1:
			w = stdout
		case 2:
			w = stderr
		case 3:
			msg, err := io.ReadAll(io.LimitReader(r, int64(min(n, 64<<10))))
			if err != nil {
				return err
			}
			return fmt.Errorf("error from the daemon in the exec's stream: %s", bytes.TrimSpace(msg))
		default:
			return fmt.Errorf("the exec's output has a frame for stream %d, which is none of stdin, stdout, stderr or the daemon's", kind)
		}
		for n > 0 {
			m, err := r.Read(buf[:min(n, uint32(len(buf)))])
			if m > 0 {
				if _, werr := w.Write(buf[:m]); werr != nil {
					return werr
				}
				n -= uint32(m)
			}
			if err == io.EOF && n > 0 {
				return io.ErrUnexpectedEOF
			}
			if err != nil && err != io.EOF {
				return err
			}
		}
	}
}
