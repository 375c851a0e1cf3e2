// Command terp is a code interpreter for open models: a model served through
// any OpenAI-compatible API runs Python in a local sandbox to answer questions
// about your data.
package main

import (
	"os"

	"github.com/terpdev/terp/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
