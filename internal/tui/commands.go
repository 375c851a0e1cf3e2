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
	"github.com/terpdev/terp/internal/pubsub"
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
	// exportedMsg says what /export wrote.
	exportedMsg struct {
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
// The loop runs in a goroutine and publishes on a broker (agent.Publish
// decides what a slow screen may miss); the UI subscribed before the turn
// began, takes one event per waitForEvent and asks for the next. Once the
// broker closes, after the last event, the turn's end is read from end.
type stream struct {
	life   context.Context
	events *pubsub.Broker[agent.Event]
	sub    <-chan agent.Event
	// end is the turn's outcome; it is written before ended is closed,
	// and ended before events is.
	end   turnDoneMsg
	ended chan struct{}
}

// newStream subscribes for a turn that has not started yet. Events wait for
// the UI for as long as ctx, the chat's life, lasts.
func newStream(ctx context.Context) *stream {
	b := pubsub.New[agent.Event](256)
	return &stream{life: ctx, events: b, sub: b.Subscribe(ctx), ended: make(chan struct{})}
}

// finish records the turn's end and closes the stream behind its events.
func (s *stream) finish(msg turnDoneMsg) {
	s.end = msg
	close(s.ended)
	s.events.Close()
}

// waitForEvent returns the stream's next message: an event, then the turn's
// end; nothing once the chat ended before the turn did.
func waitForEvent(s *stream) tea.Cmd {
	return func() tea.Msg {
		if e, ok := <-s.sub; ok {
			return eventMsg{e}
		}
		select {
		case <-s.ended:
			return s.end
		default:
			return nil
		}
	}
}

// ask runs a turn and then loads its files, sending everything on s.
func ask(ctx context.Context, conv Conversation, question string, s *stream) tea.Cmd {
	return func() tea.Msg {
		turn, err := conv.Ask(ctx, question, agent.Sender(s.life, s.events))
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

func exportConversation(ctx context.Context, export func(context.Context, string) (string, error), arg string) tea.Cmd {
	return func() tea.Msg {
		text, err := export(ctx, arg)
		return exportedMsg{text: text, err: err}
	}
}

func listConversations(ctx context.Context, list func(context.Context) (string, error)) tea.Cmd {
	return func() tea.Msg {
		text, err := list(ctx)
		return conversationsMsg{text: text, err: err}
	}
}
