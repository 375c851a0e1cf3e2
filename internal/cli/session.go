package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
)

// session is one conversation: its sandbox, the runner that runs code in it
// (the kernel starts with the sandbox, so its imports happen while the model
// thinks about the first step) and the agent that holds the history. ask
// opens one per question; chat keeps one until /new.
type session struct {
	ID      string
	Sandbox sandbox.Sandbox
	Runner  kernel.Runner
	Agent   *agent.Agent

	f   *Factory
	cfg *config.Config
}

// openSession creates the sandbox and starts the runner that cfg names.
func openSession(ctx context.Context, f *Factory, cfg *config.Config, id string) (*session, error) {
	backend, err := f.NewBackend(cfg)
	if err != nil {
		return nil, err
	}
	sbx, err := backend.Create(ctx, sandbox.Options{
		Timeout: cfg.SandboxTimeout,
		Limits: sandbox.Limits{
			MemoryBytes:   cfg.MemoryLimit,
			Processes:     cfg.ProcessLimit,
			FileSizeBytes: cfg.FileSizeLimit,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create the %s sandbox: %w", cfg.Sandbox, err)
	}
	s := &session{ID: id, Sandbox: sbx, f: f, cfg: cfg}
	if s.Runner, err = newRunner(ctx, sbx, cfg); err != nil {
		s.Close(ctx)
		return nil, err
	}
	s.Agent = agent.New(f.NewModel(cfg), sbx, s.Runner, agent.Config{
		Model:    cfg.Model,
		MaxSteps: cfg.MaxSteps,
		Timeout:  cfg.Timeout,
		ExecMode: kernel.Mode(cfg.ExecMode),
	})
	return s, nil
}

// newRunner starts what runs the model's code in sbx, as exec_mode says.
func newRunner(ctx context.Context, sbx sandbox.Sandbox, cfg *config.Config) (kernel.Runner, error) {
	if kernel.Mode(cfg.ExecMode) == kernel.ModeScript {
		return kernel.NewScript(sbx, cfg.MaxStdout, cfg.MaxStderr), nil
	}
	// The kernel lives as long as the conversation, not as the command's
	// context: Ctrl+C stops the step that is running (Run's context), and
	// Close stops the kernel.
	k, err := kernel.Start(context.WithoutCancel(ctx), sbx, kernel.Options{Prewarm: cfg.Prewarm, MaxStdout: cfg.MaxStdout, MaxStderr: cfg.MaxStderr})
	if err != nil {
		return nil, fmt.Errorf("start the Python kernel: %w", err)
	}
	return k, nil
}

// Upload copies the host file at path to /work/<basename>.
func (s *session) Upload(ctx context.Context, path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return usagef("cannot upload %s: %v", path, unwrapPath(err))
	}
	defer fh.Close()
	return s.Agent.Upload(ctx, filepath.Base(path), fh)
}

// OutDir is where files the code saved are downloaded: out_dir, or a new
// directory per conversation under the current one.
func (s *session) OutDir() string {
	if s.cfg.OutDir != "" {
		return s.cfg.OutDir
	}
	return "terp-" + s.ID
}

// savedFile is one downloaded file, as `ask --json` reports it.
type savedFile struct {
	Path        string `json:"path"`
	SandboxPath string `json:"sandbox_path"`
	Bytes       int64  `json:"bytes"`
}

// Download fetches the files the code saved into the output directory: the
// configured one, or a new directory per conversation under the current one.
// A file over the size cap is skipped with a warning; the others still come.
func (s *session) Download(ctx context.Context, files []sandbox.FileInfo) ([]savedFile, error) {
	if len(files) == 0 {
		return nil, nil
	}
	// Downloads happen even after Ctrl+C: the files are the user's results.
	ctx = context.WithoutCancel(ctx)
	dir := s.OutDir()
	var out []savedFile
	var errs []error
	for _, fi := range files {
		if fi.Size > s.cfg.MaxDownloadSize {
			fmt.Fprintf(s.f.IO.ErrOut, "warning: skipped /work/%s: %s is over max_download_size (%s)\n",
				sanitize.Terminal(fi.Path), humanBytes(fi.Size), humanBytes(s.cfg.MaxDownloadSize))
			continue
		}
		p, n, err := agent.Download(ctx, s.Sandbox, fi.Path, dir, s.cfg.MaxDownloadSize)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, savedFile{Path: p, SandboxPath: sandbox.WorkDir + "/" + fi.Path, Bytes: n})
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("download files: %w", errors.Join(errs...))
	}
	return out, nil
}

// Close stops the runner and removes the sandbox. The caller's context may
// be cancelled by now (Ctrl+C); cleaning up must still happen.
func (s *session) Close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if s.Runner != nil {
		_ = s.Runner.Close()
	}
	if err := s.Sandbox.Close(ctx); err != nil {
		fmt.Fprintln(s.f.IO.ErrOut, "warning: removing the sandbox: "+err.Error())
	}
}
