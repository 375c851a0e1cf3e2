package llm

import (
	"regexp"
	"strconv"
	"sync"
)

// Where servers say, in a context-length error, how large the window is and
// how large the request was. Each list is in order of trust: vLLM's
// "you requested N tokens" counts the completion too, so it comes last.
// They are compiled on first use, not when Go initialises the package,
// which every terp command pays for.
var (
	windowPatterns = sync.OnceValue(func() []*regexp.Regexp {
		return []*regexp.Regexp{
			regexp.MustCompile(`(?i)maximum context length is (\d+)`),      // vLLM, OpenAI
			regexp.MustCompile(`(?i)maximum model length (?:of|is) (\d+)`), // vLLM V1
			regexp.MustCompile(`(?i)context length \((\d+) tokens\)`),      // SGLang
			regexp.MustCompile(`(?i)context size \((\d+) tokens\)`),        // llama.cpp
			regexp.MustCompile(`"n_ctx"\s*:\s*(\d+)`),                      // llama.cpp's error fields
		}
	})
	promptPatterns = sync.OnceValue(func() []*regexp.Regexp {
		return []*regexp.Regexp{
			regexp.MustCompile(`"n_prompt_tokens"\s*:\s*(\d+)`),        // llama.cpp's error fields
			regexp.MustCompile(`(?i)\((\d+) in the messages`),          // vLLM
			regexp.MustCompile(`(?i)has (\d+) input tokens`),           // vLLM 0.10+
			regexp.MustCompile(`(?i)prompt \(length (\d+)\)`),          // vLLM V1
			regexp.MustCompile(`(?i)the input \((\d+) tokens\)`),       // SGLang
			regexp.MustCompile(`(?i)request \((\d+) tokens\) exceeds`), // llama.cpp
			regexp.MustCompile(`(?i)you requested (\d+) tokens`),       // vLLM, with the completion
		}
	})
)

// contextNumbers reads the context window and the request's size from a
// context-length error, 0 for what it does not say.
func contextNumbers(text string) (window, prompt int) {
	return firstNumber(text, windowPatterns()), firstNumber(text, promptPatterns())
}

func firstNumber(text string, patterns []*regexp.Regexp) int {
	for _, re := range patterns {
		if m := re.FindStringSubmatch(text); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}
