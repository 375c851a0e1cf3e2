package agent

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// The system prompt and the tool's description are worded for the family of
// models that reads them (config.Profile's prompt, resolved by
// config.ForModel). Models learn to use a code tool from the words it was
// described in during their training: gpt-oss from its built-in python tool
// ("a stateful Jupyter notebook environment", "the drive at '/mnt/data'",
// "time out after 120.0 seconds"), GLM-4 from its All Tools python (the same
// notebook and drive), Qwen from Qwen-Agent's code interpreter ("Python code
// sandbox", a Jupyter kernel). A prompt in those words gets the notebook
// habits those models have (files in /mnt/data, display(), !pip), which the
// sandbox then honours, instead of a first step spent finding out where the
// files are. The tool itself never changes: run_python, with {"code": ...},
// and the same JSON result.
//
// Each wording names one directory for the files. /work and /mnt/data are
// the same directory in every sandbox (sandbox.DataDir); the wordings of the
// families trained on /mnt/data name it, the others /work, which is terp's
// own name and what every other message (a download, a warning) uses.

// Prompt names a wording of the system prompt and the tool.
type Prompt string

// The wordings; config's prompt key names them.
const (
	PromptDefault Prompt = "default"
	PromptGPTOSS  Prompt = "gpt-oss"
	PromptQwen3   Prompt = "qwen3"
	PromptGLM4    Prompt = "glm-4"
)

// Prompts lists the wordings.
func Prompts() []Prompt { return slices.Sorted(maps.Keys(wordings)) }

// promptFacts are what a wording needs to know of the conversation.
type promptFacts struct {
	mode    kernel.Mode
	network sandbox.Network
	timeout time.Duration
}

// wording is one family's words for the tool and the system prompt.
type wording struct {
	// dir is where the model is told its files are.
	dir string
	// tool describes run_python in the given mode.
	tool func(f promptFacts, dir string) string
	// intro is the system prompt's first sentence, before the list of
	// files.
	intro string
}

var wordings = map[Prompt]wording{
	PromptDefault: {dir: sandbox.WorkDir, tool: defaultTool, intro: analystIntro},
	PromptQwen3:   {dir: sandbox.WorkDir, tool: qwenTool, intro: analystIntro},
	PromptGPTOSS:  {dir: sandbox.DataDir, tool: notebookTool, intro: analystIntro},
	PromptGLM4:    {dir: sandbox.DataDir, tool: glmTool, intro: analystIntro},
}

// analystIntro follows the seed: a data analyst that computes every number
// with the tool.
const analystIntro = "You are a data analyst. Use the run_python tool to compute every number " +
	"you report; never guess or do arithmetic in your head."

// wordingOf returns the wording p names, the default one for "" or a name
// it does not know.
func wordingOf(p Prompt) wording {
	if w, ok := wordings[p]; ok {
		return w
	}
	return wordings[PromptDefault]
}

// defaultTool is terp's own description, for models of no known family.
func defaultTool(f promptFacts, dir string) string {
	net := NetworkSentence(f.network)
	if f.mode == kernel.ModeScript {
		return "Run a Python 3 script in an isolated sandbox. Files are in " + dir + ", which is the working " +
			"directory. Each call runs as a new process: variables do not survive between calls, files in " + dir +
			" do. " + net + " numpy, pandas and matplotlib are installed. Returns exit_code, stdout and stderr " +
			"(long output is cut in the middle) and the files the script saved."
	}
	return "Run Python 3 code in a persistent session in an isolated sandbox, like a notebook cell: variables, " +
		"imports and functions from earlier calls are still defined, and the value of a last bare expression is " +
		"shown (end it with ; to hide it). Files are in " + dir + ", the working directory. " + net + " numpy, " +
		"pandas and matplotlib are installed; matplotlib figures are saved as PNG files in " + dir + " when you " +
		"call plt.show() or leave them open (or save them yourself with plt.savefig). Returns exit_code, stdout " +
		"and stderr (long output is cut in the middle), the files saved, and a note when the session was restarted."
}

// notebookTool is gpt-oss's python tool in its own words, with what terp's
// notebook adds (display, ace_tools, IPython's syntax).
func notebookTool(f promptFacts, dir string) string {
	var b strings.Builder
	if f.mode == kernel.ModeScript {
		fmt.Fprintf(&b, "When you send Python code to run_python, it will be executed as a new Python program, not in a "+
			"notebook: variables do not persist between calls, files do. run_python will respond with the output "+
			"of the execution or time out after %s seconds. The drive at '%s' can be used to save and persist "+
			"user files; it is the working directory.", seconds(f.timeout), dir)
	} else {
		fmt.Fprintf(&b, "When you send Python code to run_python, it will be executed in a stateful Jupyter notebook "+
			"environment. run_python will respond with the output of the execution or time out after %s seconds. "+
			"The drive at '%s' can be used to save and persist user files; it is the working directory.",
			seconds(f.timeout), dir)
	}
	b.WriteString(" " + internetSentence(f.network))
	b.WriteString(" numpy, pandas and matplotlib are installed; IPython's !commands and %magics work. Use " +
		"ace_tools.display_dataframe_to_user(name: str, dataframe: pandas.DataFrame) -> None to present a DataFrame " +
		"to the user (it is saved as a CSV file).")
	if f.mode != kernel.ModeScript {
		b.WriteString(" Figures you show or leave open are saved as PNG files in " + dir + ".")
	}
	return b.String()
}

// glmTool is GLM-4's All Tools python in English (its template says it in
// Chinese, which would pull the answers into Chinese too).
func glmTool(f promptFacts, dir string) string {
	what := "the code will be executed in a stateful Jupyter notebook environment"
	if f.mode == kernel.ModeScript {
		what = "the code will be executed as a new Python program: variables do not persist between calls, files do"
	}
	return fmt.Sprintf("When you send a message containing Python code to run_python, %s. run_python returns the "+
		"output of the code execution, or a timeout after %s seconds. %s will persistently store your files; it is "+
		"the working directory. %s numpy, pandas and matplotlib are installed.",
		what, seconds(f.timeout), dir, internetSentence(f.network))
}

// qwenTool is Qwen-Agent's code interpreter, which is a Jupyter kernel.
func qwenTool(f promptFacts, dir string) string {
	if f.mode == kernel.ModeScript {
		return "Python code sandbox, which can be used to execute Python code. Each call runs as a new Python " +
			"program: variables do not persist between calls, files in " + dir + " (the working directory) do. " +
			NetworkSentence(f.network) + " numpy, pandas and matplotlib are installed. Returns exit_code, stdout " +
			"and stderr and the files saved."
	}
	return "Python code sandbox, which can be used to execute Python code. It runs in a Jupyter kernel: " +
		"variables, imports and functions from earlier calls persist, and the value of the last expression is " +
		"shown. Files are in " + dir + ", the working directory. " + NetworkSentence(f.network) + " numpy, pandas " +
		"and matplotlib are installed; figures left open are saved as PNG files in " + dir + ". Returns " +
		"exit_code, stdout and stderr, the files saved, and a note when the kernel was restarted."
}

// internetSentence is NetworkSentence in the notebook prompts' words,
// which warn off web requests that would fail.
func internetSentence(n sandbox.Network) string {
	if n.Off() {
		return "Internet access for this session is disabled. Do not make external web requests or API calls as they will fail."
	}
	return NetworkSentence(n)
}

// seconds is a timeout as the notebook prompts write it ("120.0").
func seconds(d time.Duration) string {
	if d <= 0 {
		d = 2 * time.Minute
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}

// systemPrompt tells the model what it is for and where its files are, in
// the wording's words.
func (w wording) systemPrompt(files []sandbox.FileInfo) string {
	var b strings.Builder
	b.WriteString(w.intro + " Files are in " + w.dir)
	if len(files) == 0 {
		b.WriteString(" (empty for now).")
	} else {
		b.WriteString(":\n")
		names := shown(files)
		size := make(map[string]int64, len(names))
		for _, f := range files {
			size[f.Path] = f.Size
		}
		for _, n := range names {
			fmt.Fprintf(&b, "- %s (%d bytes)\n", path.Join(w.dir, n), size[n])
		}
		if more := len(files) - len(names); more > 0 {
			fmt.Fprintf(&b, "- and %s more files (%s in all); list them with code when you need them\n", commas(more), commas(len(files)))
		}
	}
	b.WriteString("\nSave charts as PNG files in " + w.dir + " (with matplotlib: plt.savefig), and say " +
		"which files you saved. When you have the answer, reply in plain text without calling the tool.")
	return b.String()
}

// PromptText is what a conversation with cfg sends the model before its
// first question: the system prompt (for a sandbox whose files are files)
// and the tool's description, for `terp config show` and `terp doctor`.
func PromptText(cfg Config, files []sandbox.FileInfo) (system, tool string) {
	w := wordingOf(cfg.Prompt)
	return w.systemPrompt(files), w.tool(cfg.promptFacts(), w.dir)
}

func (c Config) promptFacts() promptFacts {
	return promptFacts{mode: c.ExecMode, network: c.Network, timeout: c.Timeout}
}
