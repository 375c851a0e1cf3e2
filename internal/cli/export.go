package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/export"
	"github.com/terpdev/terp/internal/fsext"
	"github.com/terpdev/terp/internal/store"
)

// exportFormats are the formats of an export, by the extension of their
// file.
var exportFormats = []string{"ipynb", "html", "md"}

func newCmdSessionsExport(f *Factory) *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "export ID [--format ipynb|html|md] [-o FILE]",
		Short: "Export a conversation as a Jupyter notebook, a web page or Markdown",
		Long: `Export writes a stored conversation in a form to hand a colleague:

  ipynb  a Jupyter notebook: each question and answer as Markdown, each run
         as a code cell with its outputs (text, errors, charts). It runs top
         to bottom next to copies of the uploads: paths in /work are made
         relative to the notebook's directory.
  html   one self-contained page (charts embedded, code highlighted, nothing
         loaded from any other host), readable on a phone.
  md     Markdown for an issue or a wiki; the charts are written beside it,
         in FILE_files/.

The charts come from the conversation's sandbox, resumed and paused again
(or from the copies downloaded to this machine); a file saved by several
runs shows as it is now. The format is --format's, or -o's extension; -o is
ID.FORMAT by default, "-" for stdout.`,
		Example: `  terp sessions export 3f9c --format ipynb
  terp sessions export 3f9c -o report.html
  terp sessions export 3f9c -o notes.md`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeConversations(f, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, out, err := exportTarget(format, out)
			if err != nil {
				return err
			}
			st, rec, err := loadConversation(f, args[0])
			if err != nil {
				return err
			}
			if out == "" {
				out = rec.ID + "." + format
			}
			read, done := sandboxReader(cmd.Context(), f, st, rec)
			doc := export.Build(rec, read)
			done()
			told, err := writeExport(doc, format, out, f.IO.Out)
			for _, line := range told {
				fmt.Fprintln(f.IO.ErrOut, line)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "`FORMAT`: "+strings.Join(exportFormats, ", ")+" (default: -o's extension)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to `FILE` (default ID.FORMAT; - for stdout)")
	if err := cmd.RegisterFlagCompletionFunc("format", completeChoices(exportFormats)); err != nil {
		panic(err)
	}
	return cmd
}

// exportTarget checks --format and -o and settles the format.
func exportTarget(format, out string) (string, string, error) {
	ext := strings.TrimPrefix(filepath.Ext(out), ".")
	switch {
	case format == "" && slices.Contains(exportFormats, ext):
		format = ext
	case format == "" && out != "" && out != "-":
		return "", "", usagef("-o %s: give --format (%s), or a file name ending in one", out, strings.Join(exportFormats, ", "))
	case format == "":
		return "", "", usagef("give --format %s, or -o FILE with one of those extensions", strings.Join(exportFormats, "|"))
	case !slices.Contains(exportFormats, format):
		return "", "", usagef("--format is one of %s, not %q", strings.Join(exportFormats, ", "), format)
	}
	return format, out, nil
}

// sandboxReader reads the files of rec for an export from its sandbox,
// resumed and, when done is called, paused again; a file the sandbox does
// not have (it expired, or the backend is down) comes from its copy
// downloaded to this machine, if any. A sandbox that cannot be resumed is
// not an error: the export goes on without its charts, saying so.
func sandboxReader(ctx context.Context, f *Factory, st store.Store, rec *store.Conversation) (export.ReadFunc, func()) {
	var conv *conversation.Conversation
	var why error
	if cfg, err := f.Config(nil); err != nil {
		why = err
	} else {
		svc := conversation.New(conversation.Deps{Store: st, NewBackend: f.NewBackend})
		conv, why = svc.Resume(ctx, cfg, rec.ID)
	}
	return liveReader(ctx, conv, why, rec), func() {
		if conv != nil {
			conv.Close(context.WithoutCancel(ctx))
		}
	}
}

// liveReader reads the files of rec for an export from conv, its open
// conversation (nil when it could not be opened, for the reason why), or
// from their copies downloaded to this machine.
func liveReader(ctx context.Context, conv *conversation.Conversation, why error, rec *store.Conversation) export.ReadFunc {
	return func(name string, limit int64) ([]byte, error) {
		if conv != nil {
			if b, err := readLimited(ctx, conv, name, limit); err == nil {
				return b, nil
			} else if !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no such file") {
				return nil, err
			}
		}
		for _, d := range slices.Backward(rec.Downloads) {
			if d.Name == name {
				return readHostFile(d.Path, limit)
			}
		}
		if why != nil {
			return nil, fmt.Errorf("its sandbox could not be resumed (%v) and no copy was downloaded", why)
		}
		return nil, errors.New("the sandbox no longer has it and no copy was downloaded")
	}
}

// chatExport is /export in a chat: conv's conversation, as stored after its
// last turn, written to arg (by its extension's format), or to ID.html in
// the output directory. It returns what to tell the user.
func chatExport(ctx context.Context, st store.Store, conv *conversation.Conversation, arg string) (string, error) {
	format, out := "html", filepath.Join(conv.OutDir(), conv.ID+".html")
	if arg = strings.TrimSpace(arg); arg != "" {
		var err error
		if format, out, err = exportTarget("", arg); err != nil {
			return "", err
		}
	}
	rec, err := st.Load(conv.ID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	told, err := writeExport(export.Build(rec, liveReader(ctx, conv, nil, rec)), format, out, io.Discard)
	return strings.Join(told, "\n"), err
}

// readLimited reads the file name of conv, refusing one over limit.
func readLimited(ctx context.Context, conv *conversation.Conversation, name string, limit int64) ([]byte, error) {
	rc, err := conv.ReadFile(ctx, name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return readCapped(rc, limit)
}

func readHostFile(p string, limit int64) ([]byte, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }()
	return readCapped(fh, limit)
}

func readCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("it is over %s", config.SizeText(limit))
	}
	return b, nil
}

// writeExport writes doc in format to out ("-": stdout), with a Markdown
// export's images in OUT_files/ beside it. It returns what to tell the
// user: what it left out, and what it wrote.
func writeExport(doc *export.Doc, format, out string, stdout io.Writer) ([]string, error) {
	var told []string
	for _, w := range doc.Warnings {
		told = append(told, "warning: "+w)
	}
	render := func(w io.Writer) error {
		switch format {
		case "ipynb":
			return export.WriteNotebook(w, doc)
		case "html":
			return export.WriteHTML(w, doc)
		case "md":
			dir, assetDir := mdAssets(out, doc)
			assets, err := export.WriteMarkdown(w, doc, assetDir)
			if err != nil {
				return err
			}
			return writeAssets(dir, assets)
		}
		return fmt.Errorf("no export has the format %q", format)
	}
	if out == "-" {
		return told, render(stdout)
	}
	if err := fsext.WriteFile(out, 0o644, render); err != nil {
		return told, fmt.Errorf("write %s: %w", out, err)
	}
	return append(told, "wrote "+out), nil
}

// mdAssets is where a Markdown export's images go: the directory of the
// Markdown file (the current one for stdout) and, relative to it,
// NAME_files for NAME.md (ID_files for stdout).
func mdAssets(out string, doc *export.Doc) (dir, assetDir string) {
	if out == "-" {
		return ".", doc.ID + "_files"
	}
	return filepath.Dir(out), strings.TrimSuffix(filepath.Base(out), ".md") + "_files"
}

// writeAssets writes each asset under dir. Their names come from the
// sandbox's listing, so they are opened through os.Root: none can lead
// outside dir.
func writeAssets(dir string, assets []export.Asset) error {
	if len(assets) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	for _, a := range assets {
		p := path.Clean(a.Path)
		if d := path.Dir(p); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("write %s: %w", filepath.Join(dir, p), err)
			}
		}
		if err := root.WriteFile(p, a.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, p), err)
		}
	}
	return nil
}
