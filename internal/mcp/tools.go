package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve"
)

// The tools' names. PythonTool is the name vLLM's gpt-oss integration
// expects; RunPythonTool is terp's own, which other clients' models know
// from terp's agent. Both are one tool.
const (
	PythonTool    = "python"
	RunPythonTool = "run_python"
	UploadTool    = "upload_file"
	ListTool      = "list_files"
	DownloadTool  = "download_file"
	ResetTool     = "reset"
)

// sandboxProperty is the optional argument of every tool that names the
// sandbox by its handle (see sandboxes.go).
const sandboxProperty = `"sandbox":{"type":"string","description":"The handle (sbx_...) of the sandbox to use, ` +
	`as an earlier result gave it. Leave it out on a client with sessions; without sessions (MCP 2026-07-28 ` +
	`over HTTP) the first python or upload_file call makes a sandbox and gives its handle, which every later ` +
	`call must pass to see the same variables and files."}`

var (
	codeSchema = json.RawMessage(`{"type":"object","properties":{"code":{"type":"string",` +
		`"description":"The Python source to run, like a notebook cell: the value of a last bare expression is shown."},` +
		sandboxProperty + `},"required":["code"]}`)
	uploadSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"A plain file name (no directory): the file lands at /work/NAME."},` +
		`"text":{"type":"string","description":"The content as text (UTF-8). Give text or base64, not both."},` +
		`"base64":{"type":"string","description":"The content as base64, for binary files."},` +
		sandboxProperty + `},"required":["name"]}`)
	pathSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string",` +
		`"description":"The file's path relative to /work (or starting with /work/ or /mnt/data/)."},` +
		sandboxProperty + `},"required":["path"]}`)
	sandboxSchema = json.RawMessage(`{"type":"object","properties":{` + sandboxProperty + `}}`)
)

func (s *Server) addTools() {
	pyDesc := "Run Python 3 code in this session's persistent sandbox kernel (variables, imports and " +
		"functions survive between calls; files are in /work, the working directory). Returns the " +
		"output (stdout, then stderr, then the exit status; long output is cut in the middle), an " +
		"image for each chart or image file the code saved, and a link for each other file it saved. " +
		"An exception or a timeout is a normal result; read it and go on."
	for _, name := range []string{PythonTool, RunPythonTool} {
		s.sdk.AddTool(&sdk.Tool{Name: name, Description: pyDesc, InputSchema: codeSchema}, s.python)
	}
	s.sdk.AddTool(&sdk.Tool{Name: UploadTool, InputSchema: uploadSchema,
		Description: "Write a file to /work/NAME in this session's sandbox, from text or base64 content. " +
			"An existing file of that name is replaced."}, s.upload)
	s.sdk.AddTool(&sdk.Tool{Name: ListTool, InputSchema: sandboxSchema,
		Description: "List the files in /work with their sizes."}, s.list)
	s.sdk.AddTool(&sdk.Tool{Name: DownloadTool, InputSchema: pathSchema,
		Description: fmt.Sprintf("Return a file from /work: its content embedded (up to %s), or a resource "+
			"link to read with resources/read for a larger file.", config.SizeText(s.cfg.MaxEmbed))}, s.download)
	s.sdk.AddTool(&sdk.Tool{Name: ResetTool, InputSchema: sandboxSchema,
		Description: "Restart Python in this session's sandbox: variables and imports are gone, files in /work are kept."}, s.reset)
	s.sdk.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "work", Title: "A file in /work", URITemplate: uriPrefix + "{+path}{?sandbox}",
		Description: "A file in /work of this session's sandbox, or of the sandbox the handle names, by its path relative to /work.",
	}, s.readResource)
}

// toolError is a call the client got wrong: it reads the text and calls
// again.
func toolError(format string, a ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// args decodes a call's arguments into v, or says what is wrong.
func args(req *sdk.CallToolRequest, v any) *sdk.CallToolResult {
	raw := req.Params.Arguments
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return toolError("the arguments of %s are not a JSON object of the documented schema: %v", req.Params.Name, err)
	}
	return nil
}

// failed is the result of a call that the sandbox failed: a tool error the
// client's model reads (a busy sandbox, a client mistake, a backend down),
// for a protocol error would end the call without a word it can act on.
func failed(err error) *sdk.CallToolResult {
	if errors.Is(err, conversation.ErrBusy) {
		return toolError("this session's sandbox is busy with another call; wait for it to finish")
	}
	return toolError("%v", err)
}

// told is res with what the caller must know of sb: the handle that names
// it, and that it is new, in its text and in its _meta.
func told(res *sdk.CallToolResult, sb *box) *sdk.CallToolResult {
	if sb.handle == "" {
		return res
	}
	line := fmt.Sprintf("[sandbox %s]", sb.handle)
	switch {
	case sb.minted && sb.session:
		line = fmt.Sprintf(`[sandbox %s] this session's sandbox: after terp mcp restarts, pass "sandbox": %q to find its files again`, sb.handle, sb.handle)
	case sb.minted:
		line = fmt.Sprintf(`[sandbox %s] a new sandbox: pass "sandbox": %q in every later call to keep its variables and files`, sb.handle, sb.handle)
	}
	if tc, ok := res.Content[0].(*sdk.TextContent); ok {
		tc.Text += "\n" + line
	} else {
		res.Content = append(res.Content, &sdk.TextContent{Text: line})
	}
	res.Meta = sdk.Meta{MetaSandbox: sb.handle}
	return res
}

// MetaSandbox is the _meta key of a result that names its sandbox's handle.
const MetaSandbox = "terp.dev/sandbox"

func (s *Server) python(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in struct {
		Code    *string `json:"code"`
		Sandbox string  `json:"sandbox"`
	}
	if bad := args(req, &in); bad != nil {
		return bad, nil
	}
	if in.Code == nil || strings.TrimSpace(*in.Code) == "" {
		return toolError(`the code is missing or empty: call %s with {"code": "<python source>"}`, req.Params.Name), nil
	}
	sb, err := s.use(ctx, req.Session, req.Extra, in.Sandbox, true)
	if err != nil {
		return failed(err), nil
	}
	defer sb.done()
	if req.Extra != nil {
		// The host logs the run with the id of the request that carried
		// the call, not of the one that opened the session.
		ctx = serve.WithRequestID(ctx, req.Extra.Header.Get(serve.RequestIDHeader))
	}
	run, err := s.cfg.Host.Exec(ctx, sb.lease, *in.Code, nil)
	if err != nil {
		return failed(err), nil
	}
	res := text(runText(run))
	named := map[string]bool{}
	for _, p := range run.Shown {
		named[p] = true
	}
	for _, f := range run.Files {
		if !named[f.Path] {
			continue
		}
		res.Content = append(res.Content, s.fileContent(ctx, sb, f))
	}
	return told(res, sb), nil
}

// runText is a run as the client's model reads it: stdout, stderr, the
// exit status, and what terp has to say (a timeout, a restart, files).
func runText(run conversation.RunResult) string {
	var b strings.Builder
	b.WriteString(run.Stdout)
	if run.Stdout != "" && !strings.HasSuffix(run.Stdout, "\n") {
		b.WriteString("\n")
	}
	if run.Stderr != "" {
		b.WriteString("[stderr]\n" + run.Stderr)
		if !strings.HasSuffix(run.Stderr, "\n") {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "[exit status %d", run.ExitCode)
	if run.TimedOut {
		b.WriteString(", timed out")
	}
	b.WriteString("]")
	if run.Notice != "" {
		b.WriteString("\n[note] " + run.Notice)
	}
	if len(run.Shown) > 0 {
		paths := make([]string, len(run.Shown))
		for i, p := range run.Shown {
			paths[i] = sandboxPath(p)
		}
		b.WriteString("\n[files saved] " + strings.Join(paths, ", "))
	}
	if run.FilesNote != "" {
		b.WriteString("\n[files note] " + run.FilesNote)
	}
	for _, w := range run.Warnings {
		b.WriteString("\n[terp] " + w)
	}
	return b.String()
}

// imageTypes are the file types a run's result carries as images.
var imageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": "image/svg+xml",
}

// fileContent is how a file a run saved comes back: an image of a chart
// small enough to embed, a link to read for anything else.
func (s *Server) fileContent(ctx context.Context, sb *box, f sandbox.FileInfo) sdk.Content {
	typ, isImage := imageTypes[strings.ToLower(path.Ext(f.Path))]
	if isImage && f.Size <= s.cfg.MaxEmbed {
		if b, err := readAll(ctx, sb.conv, f.Path, s.cfg.MaxEmbed); err == nil {
			return &sdk.ImageContent{Data: b, MIMEType: typ}
		}
	}
	return link(sb, f)
}

// link is a resource link to the file f of sb.
func link(sb *box, f sandbox.FileInfo) *sdk.ResourceLink {
	size := f.Size
	return &sdk.ResourceLink{URI: workURI(f.Path, sb.handle), Name: path.Base(f.Path), Title: sandboxPath(f.Path),
		MIMEType: mimeType(f.Path), Size: &size}
}

// escapePath escapes each segment of a path for a URI, keeping the slashes.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return strings.Join(segs, "/")
}

func mimeType(p string) string {
	if t, ok := imageTypes[strings.ToLower(path.Ext(p))]; ok {
		return t
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// readAll reads the file rel of conv, refusing one over limit.
func readAll(ctx context.Context, conv *conversation.Conversation, rel string, limit int64) ([]byte, error) {
	fh, err := conv.ReadFile(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over %s: %w", sandboxPath(rel), config.SizeText(limit), errTooLarge)
	}
	return b, nil
}

// errTooLarge is a file over the size readAll was given.
var errTooLarge = errors.New("too large to read whole")

// workRel is the path relative to /work of p, a path relative to /work or
// an absolute one in it or in /mnt/data, its other name (a relative path is
// kept in /work, however many "..", as the sandbox does); ok is false for an
// absolute path outside /work. "" is /work itself.
func workRel(p string) (rel string, ok bool) {
	if strings.HasPrefix(p, "/") {
		clean := path.Clean(sandbox.WorkName(p))
		if clean == sandbox.WorkDir {
			return "", true
		}
		rel, ok = strings.CutPrefix(clean, sandbox.WorkDir+"/")
		return rel, ok
	}
	return strings.TrimPrefix(path.Clean("/"+p), "/"), true
}

func (s *Server) upload(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in struct {
		Name    string  `json:"name"`
		Text    *string `json:"text"`
		Base64  *string `json:"base64"`
		Sandbox string  `json:"sandbox"`
	}
	if bad := args(req, &in); bad != nil {
		return bad, nil
	}
	var content []byte
	switch {
	case in.Text != nil && in.Base64 != nil:
		return toolError("give the content as text or as base64, not both"), nil
	case in.Text != nil:
		content = []byte(*in.Text)
	case in.Base64 != nil:
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*in.Base64))
		if err != nil {
			return toolError("base64 is not valid standard base64: %v", err), nil
		}
		content = b
	default:
		return toolError(`give the content: {"name": "data.csv", "text": "..."} or {"name": "image.png", "base64": "..."}`), nil
	}
	sb, err := s.use(ctx, req.Session, req.Extra, in.Sandbox, true)
	if err != nil {
		return failed(err), nil
	}
	defer sb.done()
	where, err := sb.conv.Put(ctx, in.Name, bytes.NewReader(content))
	if err != nil {
		return failed(err), nil
	}
	return told(text(fmt.Sprintf("uploaded %s (%s)", where, config.SizeText(int64(len(content))))), sb), nil
}

// sandboxArg is the arguments of a tool that takes no others.
type sandboxArg struct {
	Sandbox string `json:"sandbox"`
}

func (s *Server) list(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in sandboxArg
	if bad := args(req, &in); bad != nil {
		return bad, nil
	}
	sb, err := s.use(ctx, req.Session, req.Extra, in.Sandbox, false)
	if err != nil {
		return failed(err), nil
	}
	defer sb.done()
	files, err := sb.conv.Files(ctx)
	if err != nil && len(files) == 0 {
		return failed(err), nil
	}
	var b strings.Builder
	if len(files) == 0 {
		b.WriteString("/work is empty")
	}
	for _, f := range files {
		fmt.Fprintf(&b, "%s\t%d bytes\n", sandboxPath(f.Path), f.Size)
	}
	if err != nil {
		b.WriteString(err.Error())
	}
	return told(text(b.String()), sb), nil
}

func (s *Server) download(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in struct {
		Path    string `json:"path"`
		Sandbox string `json:"sandbox"`
	}
	if bad := args(req, &in); bad != nil {
		return bad, nil
	}
	rel, ok := workRel(in.Path)
	if !ok {
		return toolError(`%s is outside /work: give the path of a file in /work, such as {"path": "chart.png"}`, path.Clean(in.Path)), nil
	}
	if rel == "" {
		return toolError(`give the path of a file in /work: {"path": "chart.png"}`), nil
	}
	sb, err := s.use(ctx, req.Session, req.Extra, in.Sandbox, false)
	if err != nil {
		return failed(err), nil
	}
	defer sb.done()
	b, err := readAll(ctx, sb.conv, rel, s.cfg.MaxEmbed)
	switch {
	case err == nil:
		rc := contents(rel, b)
		rc.URI = workURI(rel, sb.handle)
		return told(&sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: rc}}}, sb), nil
	case isMissing(err):
		return toolError("%s is not there; list_files shows what is", sandboxPath(rel)), nil
	case !errors.Is(err, errTooLarge):
		return failed(err), nil
	}
	// Too large to embed: a link, with the size when the listing knows it.
	f := sandbox.FileInfo{Path: rel}
	if files, _ := sb.conv.Files(ctx); files != nil {
		for _, fi := range files {
			if fi.Path == rel {
				f = fi
			}
		}
	}
	res := text(fmt.Sprintf("%s is larger than %s; read it with resources/read at the link", sandboxPath(rel), config.SizeText(s.cfg.MaxEmbed)))
	res.Content = append(res.Content, link(sb, f))
	return told(res, sb), nil
}

// contents is a file as a resource: text when it is UTF-8 text, else a blob.
func contents(rel string, b []byte) *sdk.ResourceContents {
	rc := &sdk.ResourceContents{URI: workURI(rel, ""), MIMEType: mimeType(rel)}
	if strings.HasPrefix(rc.MIMEType, "text/") || (!strings.HasPrefix(rc.MIMEType, "image/") && utf8.Valid(b) && !bytes.ContainsRune(b, 0)) {
		rc.Text = string(b)
		if rc.MIMEType == "application/octet-stream" {
			rc.MIMEType = "text/plain"
		}
		return rc
	}
	rc.Blob = b
	return rc
}

func (s *Server) reset(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var in sandboxArg
	if bad := args(req, &in); bad != nil {
		return bad, nil
	}
	sb, err := s.use(ctx, req.Session, req.Extra, in.Sandbox, false)
	if err != nil {
		return failed(err), nil
	}
	defer sb.done()
	if err := sb.conv.Restart(ctx); err != nil {
		return failed(err), nil
	}
	return told(text(kernel.LostSession("Python was restarted")), sb), nil
}

// readResource reads terp://work/PATH from the caller's sandbox, up to
// max_download_size.
func (s *Server) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	if !strings.HasPrefix(uri, uriPrefix) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	rest, query, _ := strings.Cut(strings.TrimPrefix(uri, uriPrefix), "?")
	rel, err := url.PathUnescape(rest)
	q, qerr := url.ParseQuery(query)
	if err != nil || qerr != nil || rel == "" {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	sb, err := s.use(ctx, req.Session, req.Extra, q.Get("sandbox"), false)
	if err != nil {
		return nil, err
	}
	defer sb.done()
	b, err := readAll(ctx, sb.conv, rel, s.cfg.Settings.MaxDownloadSize)
	if isMissing(err) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	rc := contents(rel, b)
	rc.URI = uri
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
}

// isMissing reports whether err says the file is not there.
func isMissing(err error) bool {
	var in *conversation.InputError
	return err != nil && (errors.Is(err, fs.ErrNotExist) || errors.As(err, &in) || strings.Contains(err.Error(), "no such file"))
}
