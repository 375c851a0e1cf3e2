// Package cpuos is the sandbox backend for cpuos microVMs over HTTP, and a
// server (Server) that speaks the same contract on top of any other backend.
//
// cpuos has no public REST reference yet; the seed shows only its SDK shape
// (Sandbox.create(template, timeout), files.write/read, exec(cmd, timeout) →
// exit_code/stdout/stderr, pause() → session, Sandbox.resume(session)). This
// file is the ASSUMED WIRE CONTRACT, modelled on E2B's public API
// (POST /sandboxes with templateID and timeout, POST /sandboxes/{id}/connect
// to resume, DELETE /sandboxes/{id} to kill). Every path and JSON field the
// client and the server use is defined here and nowhere else, so a change of
// names when cpuos publishes its API is a one-file edit.
//
// Authentication: every request carries "Authorization: Bearer <key>".
// Through a proxy that consumes Authorization itself (agent-sandbox's
// sandbox-router strips it), the key travels in HeaderToken instead, which
// the server accepts as well.
// Errors: any non-2xx response has the body errorBody; the status says what
// kind of error it is:
//
//	401, 403  the key is missing or rejected
//	402       the account's quota is spent
//	404       code "sandbox_not_found": the sandbox expired or was killed
//	          code "file_not_found": the path does not exist
//	429       rate limited; retried with backoff, then reported as quota
//	502-504   transient; retried with backoff
package cpuos

import "time"

// Paths. {id} is a sandbox id, {pid} a process id. Query parameter "path"
// names a file or directory inside the sandbox (absolute, under /work; the
// client sends /mnt/data paths as the /work paths they are).
//
// Inside the sandbox, /mnt/data must be /work under a second name (the
// directory notebook-trained models write to), which the code cannot remove:
// Server's sandboxes are the local backend's, which binds it; a cpuos
// template must do the same (sandbox.DataDir).
const (
	// POST createRequest → 201 sandboxResponse.
	pathSandboxes = "/sandboxes"
	// DELETE → 204: kill the sandbox, live or paused, and remove
	// everything in it.
	pathSandbox = "/sandboxes/{id}"
	// POST connectRequest → 200 sandboxResponse: resume a paused sandbox
	// by the session id pause returned.
	pathConnect = "/sandboxes/{id}/connect"
	// POST (no body) → 200 pauseResponse.
	pathPause = "/sandboxes/{id}/pause"
	// GET ?path= → 200 the file's raw bytes (application/octet-stream).
	// POST ?path= with the raw bytes as body → 204; parents are created.
	pathFiles = "/sandboxes/{id}/files"
	// GET ?path= → 200 listResponse: regular files under path, recursively.
	pathList = "/sandboxes/{id}/files/list"
	// POST execRequest → 200 execResponse, when the command has finished.
	pathExec = "/sandboxes/{id}/exec"
	// POST processRequest → 201 processResponse: start a long-lived
	// process (the Python kernel) with its standard streams attached.
	pathProcesses = "/sandboxes/{id}/processes"
	// POST raw bytes → 204: append them to the process's stdin.
	// DELETE → 204: close its stdin.
	pathStdin = "/sandboxes/{id}/processes/{pid}/stdin"
	// GET → 200 a chunked stream of the process's stdout (resp. stderr)
	// from its beginning, flushed as it is written, ending when the stream
	// closes. Each stream may be read once; a second reader gets 409.
	pathStdout = "/sandboxes/{id}/processes/{pid}/stdout"
	pathStderr = "/sandboxes/{id}/processes/{pid}/stderr"
	// POST signalRequest → 204: signal the process and all its children.
	pathSignal = "/sandboxes/{id}/processes/{pid}/signal"
	// GET → 200 waitResponse once the process has exited.
	//
	// A process is forgotten once it has exited, both its streams were
	// read to the end and a wait was answered, or at the latest a grace
	// period (a minute for terp sandbox serve) after it exited; later
	// requests for its pid get 404. A client collects everything it needs
	// before that: the kernel restarts often, and a server that kept every
	// process would grow with each restart.
	pathWait = "/sandboxes/{id}/processes/{pid}/wait"
)

// HeaderToken carries the bearer key where Authorization cannot reach the
// server.
const HeaderToken = "X-Terp-Sandbox-Token"

// queryPath is the query parameter naming a file or directory.
const queryPath = "path"

// Error codes in errorBody.Code.
const (
	codeSandboxNotFound = "sandbox_not_found"
	codeFileNotFound    = "file_not_found"
)

type createRequest struct {
	TemplateID string `json:"templateID"`
	// Timeout is the sandbox's lifetime in seconds.
	Timeout int `json:"timeout"`
	// Network is the egress policy; absent means none.
	Network *networkSpec `json:"network,omitempty"`
	// Limits; zero means the server's default.
	MemoryBytes   int64 `json:"memoryBytes,omitempty"`
	Processes     int   `json:"processes,omitempty"`
	FileSizeBytes int64 `json:"fileSizeBytes,omitempty"`
	WorkBytes     int64 `json:"workBytes,omitempty"` // disk /work may take
}

// networkSpec is sandbox.Network on the wire.
type networkSpec struct {
	Mode  string   `json:"mode"` // "none", "allowlist" or "full"
	Allow []string `json:"allow,omitempty"`
}

type sandboxResponse struct {
	SandboxID  string `json:"sandboxID"`
	TemplateID string `json:"templateID,omitempty"`
}

type connectRequest struct {
	// Timeout, in seconds, extends the resumed sandbox's lifetime; 0 keeps it.
	Timeout int `json:"timeout,omitempty"`
}

type pauseResponse struct {
	SessionID string `json:"sessionID"`
}

type fileEntry struct {
	Path    string    `json:"path"` // relative to the listed directory
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // Go fs.FileMode bits
	ModTime time.Time `json:"modTime"`
}

type listResponse struct {
	Files []fileEntry `json:"files"`
	// Total, when above len(Files), says the listing was cut to the most
	// recently modified files (sandbox.MaxListEntries).
	Total int `json:"total,omitempty"`
}

type execRequest struct {
	Cmd []string          `json:"cmd"`
	Cwd string            `json:"cwd,omitempty"` // /work when empty
	Env map[string]string `json:"env,omitempty"` // the host's never enters
	// Stdin is the command's whole standard input (base64 in JSON).
	Stdin     []byte `json:"stdin,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"` // kills the command and its children
	MaxStdout int    `json:"maxStdout,omitempty"` // bytes kept, head and tail
	MaxStderr int    `json:"maxStderr,omitempty"`
}

type execResponse struct {
	ExitCode    int    `json:"exitCode"` // 124 on timeout, 128+n when killed by signal n
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	StdoutBytes int64  `json:"stdoutBytes"` // everything written, including what was cut
	StderrBytes int64  `json:"stderrBytes"`
	TimedOut    bool   `json:"timedOut"`
	// Stopped says why the server stopped the command for breaking a
	// sandbox limit (/work too big), in words for the model.
	Stopped    string `json:"stopped,omitempty"`
	DurationMs int64  `json:"durationMs"`
}

type processRequest struct {
	Cmd []string          `json:"cmd"`
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
}

type processResponse struct {
	PID string `json:"pid"`
}

type signalRequest struct {
	Signal string `json:"signal"` // INT, TERM or KILL
}

type waitResponse struct {
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
	Stopped  string `json:"stopped,omitempty"` // as execResponse's
}

type errorBody struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}
