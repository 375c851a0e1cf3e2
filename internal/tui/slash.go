package tui

import (
	"context"
	"fmt"
	"sort"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/sanitize"
)

const keysHelp = `Keys
  enter sends · alt+enter or ctrl+j starts a new line
  ctrl+c cancels what runs (the conversation goes on); twice more quits
  pgup/pgdn scroll; ↑/↓ too when the input is empty; esc jumps to the end
  ctrl+t shows the model's thinking · ctrl+o shows all code and output
  ctrl+p/ctrl+n recall earlier questions`

func helpText() string {
	return "Commands\n" + CommandsHelp() + keysHelp
}

// command runs a slash command. A mistake clears the input, as a command
// that ran does, and the status line says what was wrong; a command refused
// while the chat is busy stays in the input, to be sent once it is not.
func (m Model) command(line string) (Model, tea.Cmd) {
	cmd, arg, err := ParseCommand(line)
	if err != nil {
		m.input.take()
		m.status.say(upperFirst(err.Error())+".", true)
		return m, nil
	}
	name := cmd.Name
	arg = unquote(arg)
	idle := func() bool {
		if m.job != nil {
			m.status.say(fmt.Sprintf("Still busy with %s: wait, or press ctrl+c to cancel it.", m.job.what), true)
			return false
		}
		return true
	}
	switch name {
	case "/help":
		m.input.take()
		m.transcript.add(&note{text: helpText()})
		m.transcript.toEnd()
		m.status.clear()
		return m, nil
	case "/quit":
		return m.quit()
	case "/model":
		if arg == "" {
			m.status.say("The model is "+m.status.info.Model+"; /model NAME switches.", false)
			m.input.take()
			return m, nil
		}
		if !idle() {
			return m, nil
		}
		m.input.take()
		// The chat is idle, so no turn holds the conversation: this
		// takes its turn lock at once, and Update does not wait.
		if err := m.conv.SetModel(m.ctx, arg); err != nil {
			m.status.say(firstLine(err.Error()), true)
			return m, nil
		}
		m.pickedModel = arg
		m.status.info = m.conv.Info()
		m.status.say("The next questions go to "+arg+".", false)
		return m, nil
	case "/steps":
		if !idle() {
			return m, nil
		}
		n, err := StepsArg(arg)
		if err != nil {
			m.input.take()
			m.status.say(upperFirst(err.Error())+".", true)
			return m, nil
		}
		m.input.take()
		if err := m.conv.SetMaxSteps(m.ctx, n); err != nil { // at once, as SetModel above
			m.status.say(firstLine(err.Error()), true)
			return m, nil
		}
		m.pickedSteps = n
		m.status.info = m.conv.Info()
		m.status.maxSteps = n
		m.status.step = 0
		m.status.say(fmt.Sprintf("At most %d steps per question from now on.", n), false)
		return m, nil
	case "/upload":
		if !idle() {
			return m, nil
		}
		return m.begin("the upload of "+arg, func(ctx context.Context) tea.Cmd { return upload(ctx, m.conv, arg) })
	case "/download":
		if !idle() {
			return m, nil
		}
		name := strings.TrimPrefix(strings.TrimPrefix(arg, "/work/"), "./")
		return m.begin("the download of "+name, func(ctx context.Context) tea.Cmd { return fetch(ctx, m.conv, name) })
	case "/export":
		if !idle() {
			return m, nil
		}
		if m.export == nil {
			m.input.take()
			m.status.say("This chat cannot export its conversation.", true)
			return m, nil
		}
		return m.begin("the export", func(ctx context.Context) tea.Cmd { return exportConversation(ctx, m.export, arg) })
	case "/files":
		if !idle() {
			return m, nil
		}
		return m.begin("listing /work", func(ctx context.Context) tea.Cmd { return listFiles(ctx, m.conv) })
	case "/new":
		if !idle() {
			return m, nil
		}
		if m.open == nil {
			m.input.take()
			m.status.say("This chat cannot start a new conversation.", true)
			return m, nil
		}
		// The conversation outlives this command, so it gets the chat's
		// context rather than the job's.
		return m.begin("a new conversation", func(context.Context) tea.Cmd { return openConversation(m.ctx, m.open) })
	case "/resume":
		if !idle() {
			return m, nil
		}
		if m.resume == nil || m.list == nil {
			m.input.take()
			m.status.say("This chat cannot resume stored conversations.", true)
			return m, nil
		}
		if arg == "" {
			// The list is shown as a note, which wraps at the width less
			// its margin.
			list, width := m.list, m.width-2
			return m.begin("listing conversations", func(ctx context.Context) tea.Cmd {
				return listConversations(ctx, func(ctx context.Context) (string, error) { return list(ctx, width) })
			})
		}
		if strings.HasPrefix(m.status.info.ID, strings.ToLower(arg)) {
			m.input.take()
			m.status.say("This is conversation "+m.status.info.ID+" already.", true)
			return m, nil
		}
		return m.begin("resuming "+arg, func(context.Context) tea.Cmd { return resumeConversation(m.ctx, m.resume, arg) })
	}
	return m, nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// begin starts a job other than a turn; its command reports to jobDone.
func (m Model) begin(what string, start func(ctx context.Context) tea.Cmd) (Model, tea.Cmd) {
	m.input.take()
	ctx, cancel := context.WithCancel(m.ctx)
	m.job = &job{what: what, cancel: cancel, started: m.clock}
	m.status.say(strings.ToUpper(what[:1])+what[1:]+"…", false)
	return m, tea.Batch(start(ctx), m.startTicking())
}

// jobDone shows what a job other than a turn came back with.
func (m *Model) jobDone(msg tea.Msg) {
	if _, ok := msg.(completionMsg); !ok {
		if m.job != nil {
			m.job.cancel()
		}
		m.job = nil
	}
	switch msg := msg.(type) {
	case uploadedMsg:
		if msg.err != nil {
			m.status.say(firstLine(msg.err.Error()), true)
			return
		}
		m.transcript.add(&note{text: fmt.Sprintf("Uploaded %s to %s; the model hears of it with your next question.", msg.path, msg.dest)})
		m.status.say("Uploaded "+msg.dest+".", false)
	case downloadedMsg:
		if msg.err != nil {
			m.status.say(firstLine(msg.err.Error()), true)
			return
		}
		f := &savedFile{name: msg.file.Name, bytes: msg.file.Bytes}
		m.attach(f, msg.file)
		m.transcript.add(&fileEntry{f: f})
		m.status.say("Downloaded "+msg.file.Path+".", false)
	case filesMsg:
		if msg.err != nil && msg.files == nil {
			m.status.say(firstLine(msg.err.Error()), true)
			return
		}
		m.transcript.add(&note{text: filesText(msg)})
		if msg.err != nil { // a listing cut short, which still holds the newest files
			m.status.say(firstLine(msg.err.Error()), true)
			return
		}
		m.status.clear()
	case exportedMsg:
		if msg.err != nil {
			m.status.say(firstLine(msg.err.Error()), true)
			return
		}
		m.transcript.add(&note{text: sanitize.Terminal(msg.text)})
		m.status.clear()
	case conversationsMsg:
		if msg.err != nil {
			m.status.say(firstLine(msg.err.Error()), true)
			return
		}
		m.transcript.add(&note{text: sanitize.Terminal(msg.text) + "\n/resume ID goes on with one (any unique prefix of the id)."})
		m.status.clear()
	case conversationMsg:
		if msg.err != nil && msg.resumed {
			m.status.say("Not resumed: "+firstLine(msg.err.Error()), true)
			return
		}
		if msg.err != nil {
			m.status.say("No new conversation: "+firstLine(msg.err.Error()), true)
			return
		}
		if msg.resumed {
			// A resumed conversation keeps its own model and step cap.
			m.conv = msg.conv
			info := m.conv.Info()
			m.status = status{info: info, maxSteps: info.MaxSteps}
			m.showPast(info)
			m.transcript.add(&note{text: fmt.Sprintf("── Resumed conversation %s after %d questions: the model remembers them, and /work is as it was.", info.ID, info.Earlier)})
			m.status.say("Resumed conversation "+info.ID+".", false)
			break
		}
		// The model and step cap the user chose hold for the new
		// conversation; a resumed one's do not.
		// A conversation just opened runs nothing, so these take its
		// turn lock at once.
		m.conv = msg.conv
		var err error
		if info := m.conv.Info(); m.pickedModel != "" && info.Model != m.pickedModel {
			err = m.conv.SetModel(m.ctx, m.pickedModel)
		}
		if info := m.conv.Info(); err == nil && m.pickedSteps != 0 && info.MaxSteps != m.pickedSteps {
			err = m.conv.SetMaxSteps(m.ctx, m.pickedSteps)
		}
		info := m.conv.Info()
		m.status = status{info: info, maxSteps: info.MaxSteps}
		m.transcript.add(&note{text: fmt.Sprintf("── New conversation %s: a fresh sandbox, and the model starts over.", info.ID)})
		if err != nil {
			m.status.say("New conversation "+info.ID+", with its own model and step cap: "+firstLine(err.Error()), true)
			break
		}
		m.status.say("New conversation "+info.ID+".", false)
	case completionMsg:
		m.completed(msg)
		return
	}
	m.transcript.toEnd()
}

func filesText(msg filesMsg) string {
	var rows []string
	for _, f := range msg.files {
		if f.Mode.IsDir() {
			continue
		}
		rows = append(rows, fmt.Sprintf("  %-32s %10s", sanitize.Terminal(f.Path), config.SizeText(f.Size)))
	}
	if len(rows) == 0 {
		return "/work is empty. /upload PATH copies a file there."
	}
	sort.Strings(rows)
	return "/work\n" + strings.Join(rows, "\n")
}

// unquote drops the quotes around a path typed with spaces in it.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
