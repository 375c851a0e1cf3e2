package sandbox

import (
	"context"
	"io"
)

// ContextReader is r that stops with ctx's error once ctx ends, for copies
// (uploads, downloads) that io.Copy would otherwise finish regardless.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
