package tui

import (
	"bytes"
	"context"
	"image"
	_ "image/gif" // decoders for the charts and images the code saves
	_ "image/jpeg"
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/sandbox"
)

// The messages the chat's commands send back. Everything that waits for
// the sandbox, the model or the disk runs in one of the commands below and
// reports with one of these; Update only looks at them.
type (
	// eventMsg is one event of the running turn.
	eventMsg struct{ event agent.Event }
	// turnDoneMsg ends a turn; files are its downloads, ready to show.
	turnDoneMsg struct {
		turn  Turn
		err   error
		files []download
	}
	uploadedMsg struct {
		path, dest string
		err        error
	}
	downloadedMsg struct {
		file download
		err  error
	}
	filesMsg struct {
		files []sandbox.FileInfo
		err   error
	}
	conversationMsg struct {
		conv Conversation
		err  error
		// resumed is set for a stored conversation /resume opened.
		resumed bool
	}
	// conversationsMsg lists the stored conversations for /resume.
	conversationsMsg struct {
		text string
		err  error
	}
	// completionMsg answers Tab: the input it was for, and the matches.
	completionMsg struct {
		input   string
		matches []string
	}
	tickMsg time.Time
)

// download is a downloaded file with what showing it needs: the absolute
// path for the link and, for an image, the decoded picture.
type download struct {
	File
	abs     string
	pic     *picture
	problem string
}

// stream carries one turn's events, and then its end, to the UI in order.
// The loop runs in a goroutine; the UI takes one message per waitForEvent
// and asks for the next. Token deltas are dropped when the UI falls behind
// (the answer comes whole at the end); other events wait for it, unless
// the chat has ended and nobody will read them.
type stream struct {
	c    chan tea.Msg
	done <-chan struct{}
}

func newStream(ctx context.Context) *stream {
	return &stream{c: make(chan tea.Msg, 256), done: ctx.Done()}
}

func (s *stream) send(e agent.Event) {
	msg := eventMsg{e}
	switch e.(type) {
	case agent.TextDelta, agent.ReasoningDelta:
		select {
		case s.c <- msg:
		default:
		}
		return
	}
	select {
	case s.c <- msg:
	case <-s.done:
	}
}

func (s *stream) finish(msg tea.Msg) {
	select {
	case s.c <- msg:
	case <-s.done:
	}
	close(s.c)
}

// waitForEvent returns the stream's next message.
func waitForEvent(s *stream) tea.Cmd {
	return func() tea.Msg {
		msg, ok := <-s.c
		if !ok {
			return nil
		}
		return msg
	}
}

// ask runs a turn and then loads its files, sending everything on s.
func ask(ctx context.Context, conv Conversation, question string, s *stream) tea.Cmd {
	return func() tea.Msg {
		turn, err := conv.Ask(ctx, question, s.send)
		done := turnDoneMsg{turn: turn, err: err}
		for _, f := range turn.Files {
			done.files = append(done.files, load(f))
		}
		s.finish(done)
		return nil
	}
}

// maxPicturePixels keeps a huge image from costing the chat its memory.
const maxPicturePixels = 40 << 20

// load prepares a downloaded file to be shown, decoding it when it is an
// image; a file that is not one is just linked.
func load(f File) download {
	d := download{File: f}
	if abs, err := filepath.Abs(f.Path); err == nil {
		d.abs = abs
	}
	switch strings.ToLower(filepath.Ext(f.Name)) {
	case ".png", ".jpg", ".jpeg", ".gif":
	default:
		return d
	}
	fh, err := os.Open(f.Path)
	if err != nil {
		d.problem = err.Error()
		return d
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, 64<<20))
	if err != nil {
		d.problem = err.Error()
		return d
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width*cfg.Height > maxPicturePixels {
		return d
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return d
	}
	d.pic = &picture{img: toRGBA(img), data: data, png: format == "png"}
	return d
}

func upload(ctx context.Context, conv Conversation, path string) tea.Cmd {
	return func() tea.Msg {
		p := expandHome(path)
		dest, err := conv.Upload(ctx, p)
		return uploadedMsg{path: path, dest: dest, err: err}
	}
}

func fetch(ctx context.Context, conv Conversation, name string) tea.Cmd {
	return func() tea.Msg {
		f, err := conv.Download(ctx, name)
		if err != nil {
			return downloadedMsg{err: err}
		}
		return downloadedMsg{file: load(f)}
	}
}

func listFiles(ctx context.Context, conv Conversation) tea.Cmd {
	return func() tea.Msg {
		files, err := conv.Files(ctx)
		return filesMsg{files: files, err: err}
	}
}

func openConversation(ctx context.Context, open func(context.Context) (Conversation, error)) tea.Cmd {
	return func() tea.Msg {
		conv, err := open(ctx)
		return conversationMsg{conv: conv, err: err}
	}
}

// completePath lists the files that could complete the path at the end of
// an "/upload " line; directories end with a slash, hidden files show only
// when the name being typed starts with a dot.
func completePath(line, partial string) tea.Cmd {
	return func() tea.Msg {
		dir, base := filepath.Split(partial)
		entries, err := os.ReadDir(expandHome(orDot(dir)))
		if err != nil {
			return completionMsg{input: line}
		}
		var matches []string
		for _, e := range entries {
			name := e.Name()
			if !strings.HasPrefix(name, base) || (strings.HasPrefix(name, ".") && !strings.HasPrefix(base, ".")) {
				continue
			}
			if e.IsDir() || isDirLink(filepath.Join(expandHome(orDot(dir)), name), e) {
				name += "/"
			}
			matches = append(matches, dir+name)
		}
		sort.Strings(matches)
		return completionMsg{input: line, matches: matches}
	}
}

func isDirLink(path string, e os.DirEntry) bool {
	if e.Type()&os.ModeSymlink == 0 {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

func orDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// expandHome turns a leading ~ into the home directory, as a shell would.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// tick drives the spinners while something runs.
func tick() tea.Cmd {
	return tea.Tick(spinner.MiniDot.FPS, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func resumeConversation(ctx context.Context, resume func(context.Context, string) (Conversation, error), ref string) tea.Cmd {
	return func() tea.Msg {
		conv, err := resume(ctx, ref)
		return conversationMsg{conv: conv, err: err, resumed: true}
	}
}

func listConversations(ctx context.Context, list func(context.Context) (string, error)) tea.Cmd {
	return func() tea.Msg {
		text, err := list(ctx)
		return conversationsMsg{text: text, err: err}
	}
}
