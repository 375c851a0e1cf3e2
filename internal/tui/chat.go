// Package tui is terp's interactive chat: a Bubble Tea program that shows
// the agent loop's events as they come (the model's reasoning, its code,
// the output, the charts the code saved, the answer) and lets the user ask
// the next question. It only consumes events: the conversation itself is
// behind the Conversation interface, and everything that waits on it runs
// in commands that report back with typed messages.
package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// Options configure the chat.
type Options struct {
	// Context bounds everything the chat starts; turns are cancelled with
	// it. The CLI cancels it when the program ends.
	Context      context.Context
	Conversation Conversation
	// New opens a new conversation for /new, with Context: the
	// conversation outlives the command that opens it. Closing the old
	// one is the caller's business.
	New func(ctx context.Context) (Conversation, error)
	// Resume opens the stored conversation ref (an id or a unique prefix)
	// for /resume ID, with Context like New. Conversations lists the stored
	// conversations as text for /resume alone, in lines at most width
	// cells wide, so the table is not broken by wrapping. Either may be nil.
	Resume        func(ctx context.Context, ref string) (Conversation, error)
	Conversations func(ctx context.Context, width int) (string, error)
	// Export writes the conversation for /export [FILE] and says what it
	// wrote; nil offers no export.
	Export func(ctx context.Context, arg string) (string, error)
	// Renderer is the output's lipgloss renderer: it knows the colour
	// profile (NO_COLOR) and the background.
	Renderer *lipgloss.Renderer
	Protocol Protocol
	// Uploaded lists the files uploaded before the chat began, for the
	// welcome.
	Uploaded []string
	// Now is the clock, time.Now when nil; tests fix it so that spinners
	// and timings draw the same every time.
	Now func() time.Time
}

// Model is the chat. It routes messages to its parts, the transcript, the
// input and the status line, and holds what runs: at most one job (a turn,
// an upload, a download, a listing, a new conversation) at a time, because
// a conversation does one thing at a time.
type Model struct {
	ctx      context.Context
	conv     Conversation
	open     func(context.Context) (Conversation, error)
	resume   func(context.Context, string) (Conversation, error)
	list     func(ctx context.Context, width int) (string, error)
	export   func(ctx context.Context, arg string) (string, error)
	now      func() time.Time
	clock    time.Time
	theme    *theme
	markdown *markdown
	code     *highlighter
	protocol Protocol

	transcript transcript
	input      input
	status     status

	width, height int
	job           *job
	// tick schedules the next spinner frame; tests replace it.
	tick    func() tea.Cmd
	ticking bool
	// quitArmed is set by a ctrl+c: a second one quits.
	quitArmed bool
	// thoughts and output unfold the reasoning and long output.
	thoughts, output bool
	lastImageID      int
	// picked are the model and step cap the user chose with /model and
	// /steps ("" and 0 until then): they hold for a /new conversation,
	// where a resumed conversation's own never do.
	pickedModel string
	pickedSteps int
}

// job is the work in progress.
type job struct {
	what       string
	cancel     context.CancelFunc
	cancelling bool // ctrl+c cancelled it; it has not ended yet
	started    time.Time
	// For a turn: its events, its steps, and the tokens the conversation
	// had used before it.
	stream       *stream
	steps        []*step
	tokensBefore int
}

// New returns the chat for a conversation.
func New(opts Options) Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Renderer == nil {
		opts.Renderer = lipgloss.DefaultRenderer()
	}
	t := newTheme(opts.Renderer)
	info := opts.Conversation.Info()
	m := Model{
		ctx:        opts.Context,
		conv:       opts.Conversation,
		open:       opts.New,
		resume:     opts.Resume,
		list:       opts.Conversations,
		export:     opts.Export,
		now:        opts.Now,
		clock:      opts.Now(),
		theme:      &t,
		markdown:   newMarkdown(t.markdown, t.profile),
		code:       newHighlighter(t.code, t.codeFormat),
		protocol:   opts.Protocol,
		tick:       tick,
		transcript: newTranscript(),
		input:      newInput(&t),
		status:     status{info: info, maxSteps: info.MaxSteps},
		// A random-looking start keeps kitty image ids apart from
		// those of other programs in the same window.
		lastImageID: int(opts.Now().UnixNano()>>10) & 0xfff000,
	}
	m.showPast(info)
	m.transcript.add(&note{text: welcome(info, opts.Uploaded)})
	return m
}

// showPast puts a stored conversation's last exchanges in the transcript,
// so that the user sees where it stands, as the model does.
func (m *Model) showPast(info Info) {
	if n := info.Earlier - len(info.Past); n > 0 && len(info.Past) > 0 {
		m.transcript.add(&note{text: fmt.Sprintf("… %d earlier questions", n)})
	}
	for _, x := range info.Past {
		m.transcript.add(&question{text: x.Question})
		if x.Answer != "" {
			m.transcript.add(&answer{text: x.Answer})
		}
	}
}

func welcome(info Info, uploaded []string) string {
	s := fmt.Sprintf("terp chat · %s · %s sandbox · conversation %s\n"+
		"Ask a question about your data; the model answers by running Python. /help lists the commands.",
		info.Model, info.Sandbox, info.ID)
	switch {
	case info.Earlier == 1:
		s += "\nGoing on with this conversation after its first question: the model remembers it."
	case info.Earlier > 1:
		s += fmt.Sprintf("\nGoing on with this conversation after %d questions: the model remembers them.", info.Earlier)
	}
	if len(uploaded) > 0 {
		s += "\nUploaded: " + strings.Join(uploaded, ", ")
	}
	return s
}

// Init starts nothing: the first message is the terminal's size.
func (m Model) Init() tea.Cmd { return nil }

// Update routes msg and returns the model with the commands it starts.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m.clock = m.now()
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		m, cmd = m.key(msg)
	case eventMsg:
		m.event(msg.event)
		if m.job != nil && m.job.stream != nil {
			cmd = waitForEvent(m.job.stream)
		}
	case turnDoneMsg:
		m.turnDone(msg)
	case tickMsg:
		m.ticking = false
		if m.job != nil {
			cmd = m.startTicking()
			if s := m.activeStep(); s != nil {
				m.transcript.touch(s)
			}
		}
	case uploadedMsg, downloadedMsg, filesMsg, conversationMsg, conversationsMsg, exportedMsg, completionMsg:
		m.jobDone(msg)
	default:
		var c tea.Cmd
		m.input, c = m.input.update(msg)
		cmd = c
	}
	m.layout()
	return m, cmd
}

// View draws the screen: transcript, message line, input, status bar.
func (m Model) View() string {
	if m.width == 0 {
		return ""
	}
	return strings.Join([]string{
		m.transcript.view(),
		m.status.noticeLine(m.theme, m.width, m.job != nil, !m.transcript.atEnd()),
		m.input.view(),
		m.status.bar(m.theme, m.width),
	}, "\n")
}

// layout sizes the parts to the screen and draws what changed.
func (m *Model) layout() {
	if m.width == 0 {
		return
	}
	m.input.setWidth(m.width)
	m.transcript.resize(m.width, m.height-m.input.height()-2)
	m.transcript.refresh(&renderContext{
		width:    m.width,
		height:   m.height,
		theme:    m.theme,
		now:      m.clock,
		thoughts: m.thoughts,
		output:   m.output,
		markdown: m.markdown,
		code:     m.code,
		protocol: m.protocol,
	})
}

func (m *Model) startTicking() tea.Cmd {
	if m.ticking {
		return nil
	}
	m.ticking = true
	return m.tick()
}
