package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// --network allowlist from the flag reaches the sandbox (the code finds the
// proxy and is refused a host not on the list, with the reason) and the
// model (its tool description names the hosts).
func TestAskNetworkAllowlist(t *testing.T) {
	code := `import os, urllib.request
print("proxy", os.environ.get("HTTPS_PROXY"))
try:
    urllib.request.urlopen("https://not-allowed.test/", timeout=10)
except Exception as e:
    print("fetch:", e)
`
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), answerFromTool(t))
	r := terp(t, serverEnv(s), "", "ask", "--network", "allowlist", "--network-allow", "example.org,*.example.net", "Fetch it")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"proxy http://127.0.0.1:3128", "403 Forbidden (not-allowed.test is not in the sandbox's allowlist (example.org, *.example.net)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("answer lacks %q:\n%s", want, r.stdout)
		}
	}
	desc := s.Requests()[0].Tools[0].Function.Description
	if !strings.Contains(desc, "limited to HTTP(S) to example.org, *.example.net") {
		t.Errorf("tool description does not name the allowed hosts:\n%s", desc)
	}

	bad := terp(t, serverEnv(s), "", "ask", "--network", "allowlist", "--network-allow", "10.0.0.1", "x")
	if bad.code != 2 || !strings.Contains(bad.stderr, "network_allow") {
		t.Errorf("an address in the allowlist: exit %d, stderr:\n%s", bad.code, bad.stderr)
	}
}

// The default tells the model there is no network, and the code finds none.
func TestAskNetworkNoneByDefault(t *testing.T) {
	code := `import os, socket
print("proxy", os.environ.get("HTTPS_PROXY"))
try:
    socket.getaddrinfo("pypi.org", 443); print("dns ok")
except OSError:
    print("dns failed")
`
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), answerFromTool(t))
	r := terp(t, serverEnv(s), "", "ask", "Fetch it")
	if r.code != 0 || !strings.Contains(r.stdout, "proxy None") || !strings.Contains(r.stdout, "dns failed") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if desc := s.Requests()[0].Tools[0].Function.Description; !strings.Contains(desc, "There is no network.") {
		t.Errorf("tool description:\n%s", desc)
	}
}

// A conversation keeps the network its sandbox was made with: --continue
// without --network keeps the allowlist (the model is told so again), and
// asking for another is refused with a warning rather than half applied.
func TestContinueKeepsNetwork(t *testing.T) {
	home := terptest.TempDir(t)
	var steps []llmtest.Step
	for range 3 { // three questions, each a run and an answer
		steps = append(steps, llmtest.Fixed(llmtest.RunPython(`import os; print(os.environ.get("HTTPS_PROXY"))`)), answerFromTool(t))
	}
	s := llmtest.New(t, steps...)
	env := serverEnv(s)
	env["XDG_DATA_HOME"] = home
	first := terp(t, env, "", "ask", "--network", "allowlist", "--network-allow", "example.org", "one")
	if first.code != 0 || !strings.Contains(first.stdout, "http://127.0.0.1:3128") {
		t.Fatalf("first: exit %d\n%s%s", first.code, first.stdout, first.stderr)
	}
	for _, args := range [][]string{
		{"ask", "-c", "two"},
		{"ask", "-c", "--network", "none", "three"},
	} {
		r := terp(t, env, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "http://127.0.0.1:3128") {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		warned := strings.Contains(r.stderr, "this conversation's sandbox keeps network allowlist (example.org)")
		if explicit := len(args) > 3; warned != explicit {
			t.Errorf("%v: warned %v, want %v; stderr:\n%s", args, warned, explicit, r.stderr)
		}
	}
	last := s.Requests()[len(s.Requests())-1]
	if desc := last.Tools[0].Function.Description; !strings.Contains(desc, "limited to HTTP(S) to example.org") {
		t.Errorf("the resumed conversation's model is not told its network:\n%s", desc)
	}
}

// Settings belong to a conversation: a chat that resumes an allowlist
// conversation and then starts a /new one gives the new one the chat's own
// settings (no network, the chat's model), not the resumed one's; and the
// resumed one keeps its network.
func TestResumeThenNewKeepsSettingsApart(t *testing.T) {
	home := terptest.TempDir(t)
	proxy := `import os; print(os.environ.get("HTTPS_PROXY"))`
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(proxy)), answerFromTool(t), // the allowlist conversation
		llmtest.Fixed(llmtest.RunPython(proxy)), answerFromTool(t), // resumed in the chat
		llmtest.Fixed(llmtest.RunPython(proxy)), answerFromTool(t)) // the /new one
	env := serverEnv(s)
	env["XDG_DATA_HOME"] = home
	first := terp(t, env, "", "ask", "--json", "--network", "allowlist", "--network-allow", "example.org", "--model", "stored-model", "one")
	stored := askJSONOf(t, first)
	if first.code != 0 {
		t.Fatalf("first: exit %d\n%s", first.code, first.stderr)
	}
	// The chat's own model is the default: TERP_MODEL would be the
	// user's choice for every conversation, the resumed one's too.
	delete(env, "TERP_MODEL")
	chat := terp(t, env, "/resume "+stored.ConversationID+"\ntwo\n/new\nthree\n", "chat")
	if chat.code != 0 {
		t.Fatalf("chat: exit %d\n%s%s", chat.code, chat.stdout, chat.stderr)
	}
	answers := strings.Split(strings.TrimSpace(chat.stdout), "\n")
	if len(answers) != 2 || !strings.Contains(answers[0], "http://127.0.0.1:3128") || !strings.Contains(answers[1], "None") {
		t.Errorf("the resumed conversation should reach the proxy and the new one should have no network; answers:\n%s\nstderr:\n%s", chat.stdout, chat.stderr)
	}
	reqs := s.Requests()
	if got := reqs[2].Model; got != "stored-model" {
		t.Errorf("the resumed conversation asked %q, want its own model stored-model", got)
	}
	if got := reqs[4].Model; got == "stored-model" {
		t.Errorf("the /new conversation inherited the resumed one's model %q", got)
	}
	if desc := reqs[4].Tools[0].Function.Description; !strings.Contains(desc, "There is no network.") {
		t.Errorf("the /new conversation's model is told:\n%s", desc)
	}
	st, err := store.Open(filepath.Join(home, "terp"))
	if err != nil {
		t.Fatal(err)
	}
	latest, err := st.Latest()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Load(latest)
	if err != nil {
		t.Fatal(err)
	}
	if latest == stored.ConversationID || rec.Settings.Network == "allowlist" || rec.Settings.Model == "stored-model" {
		t.Errorf("the /new conversation %s was stored with network %q and model %q", latest, rec.Settings.Network, rec.Settings.Model)
	}
}
