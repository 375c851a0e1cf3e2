package strict

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"run_python"}}]`
	call := func(id, name, args string) string {
		return `{"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":` + args + `}}`
	}
	asked := func(calls ...string) string {
		return `{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + `]}`
	}
	answer := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"ok"}` }
	body := func(msgs ...string) string {
		return `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"q"},` + strings.Join(msgs, ",") + `]}`
	}
	ok := call("a", "run_python", `"{\"code\":\"1\"}"`)
	tests := []struct {
		name, body string
		want       string // a part of the error; "" when the server accepts it
	}{
		{"a call answered", body(asked(ok), answer("a"), `{"role":"assistant","content":"done"}`), ""},
		{"two calls answered in any order", body(asked(ok, call("b", "run_python", `"{}"`)), answer("b"), answer("a")), ""},
		{"a call without an id", body(asked(call("", "run_python", `"{}"`)), answer("")), "no id"},
		{"a call of another type", body(strings.Replace(asked(ok), `"type":"function"`, `"type":"code"`, 1), answer("a")), `type "code"`},
		{"a tool not offered", body(asked(call("a", "python", `"{}"`)), answer("a")), `"python" is not one of the tools`},
		{"arguments that are raw code", body(asked(call("a", "run_python", `"print(1)"`)), answer("a")), "not a JSON object"},
		{"arguments that are an object, not a string", body(asked(call("a", "run_python", `{"code":"1"}`)), answer("a")), "not a string"},
		{"empty arguments", body(asked(call("a", "run_python", `""`)), answer("a")), "not a JSON object"},
		{"a call never answered", body(asked(ok)), "have no tool message"},
		{"a call answered after the user spoke", body(asked(ok), `{"role":"user","content":"and?"}`, answer("a")), "have no tool message"},
		{"a call answered twice", body(asked(ok), answer("a"), answer("a")), "already answered"},
		{"an answer to no call", body(answer("x")), "answers no call"},
		{"an id used twice", body(asked(ok), answer("a"), asked(ok), answer("a")), "used twice"},
		{"a tool message without content", body(asked(ok), `{"role":"tool","tool_call_id":"a"}`), "needs content"},
		{"not a chat request", `{"messages":`, "not a chat request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.body))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check = %v, want an error about %q", err, tt.want)
			}
		})
	}
}
