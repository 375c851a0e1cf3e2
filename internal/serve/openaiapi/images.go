package openaiapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/serve/state"
)

// Images a client attaches (chat completions' image_url parts, the
// Responses API's input_image) are files in /work, and are shown to the
// model as well unless its profile says it takes none
// (conversation.TurnRequest.Images).

// maxShownImage bounds an image shown to the model: larger ones are files
// for the code only. A fetched image larger than it is refused.
const maxShownImage = 20 << 20

// imageTypes are the types of image a model is shown, with the extension
// each is saved under.
var imageTypes = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}

// fetchTimeout bounds fetching an image a client names by URL.
const fetchTimeout = 30 * time.Second

// imageFile is an image sent as a data URL, named image_N: uploaded, and
// shown when it is of a type a model takes.
func imageFile(url, param string, n int) (namedFile, *paramError) {
	mime, data, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,")
	if !strings.HasPrefix(url, "data:") || !ok {
		return namedFile{}, badParam(param, "an image is sent as a data URL (data:image/png;base64,...)")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return namedFile{}, badParam(param, "the image's data URL is not base64")
	}
	ext := imageTypes[mime]
	if ext == "" {
		return namedFile{name: fmt.Sprintf("image_%d.bin", n), data: b}, nil // uploaded, not shown
	}
	return namedFile{name: fmt.Sprintf("image_%d%s", n, ext), data: b, image: url}, nil
}

// inputImage is an input_image part: a data URL, a stored file by id, or
// an http(s) URL, which fetchImages fetches once the container is known.
func (s *api) inputImage(ctx context.Context, owner string, p inputPart, param string, n int) (namedFile, *paramError) {
	switch u := p.ImageURL; {
	case p.FileID != "":
		f, perr := s.storedFile(ctx, owner, p.FileID, param+".file_id", fmt.Sprintf("no file found with id '%s'", p.FileID))
		if perr != nil {
			return namedFile{}, perr
		}
		nf := namedFile{name: f.Filename, file: &f}
		if mime := typeOfName(f.Filename); mime != "" && f.Bytes <= maxShownImage {
			rc, err := s.State().OpenFile(ctx, f)
			if err != nil {
				return namedFile{}, &paramError{err: err}
			}
			b, err := io.ReadAll(io.LimitReader(rc, maxShownImage))
			rc.Close()
			if err != nil {
				return namedFile{}, &paramError{err: err}
			}
			nf.image = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
		}
		return nf, nil
	case strings.HasPrefix(u, "data:"):
		return imageFile(u, param+".image_url", n)
	case strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://"):
		return namedFile{name: fmt.Sprintf("image_%d", n), fetch: u, param: param + ".image_url"}, nil
	}
	return namedFile{}, badParam(param, "an input_image has an image_url (a data URL, or an http(s) URL the container's network policy allows) or a file_id")
}

// typeOfName is the image type a file's name says, "" for none a model
// takes.
func typeOfName(name string) string {
	for mime, ext := range imageTypes {
		if strings.EqualFold(path.Ext(name), ext) || (ext == ".jpg" && strings.EqualFold(path.Ext(name), ".jpeg")) {
			return mime
		}
	}
	return ""
}

// fetchImages fetches the images files name by URL, as the container's
// network policy allows: any host with "full", the allowlist's hosts (at
// public addresses, as the sandbox's egress proxy dials them) with
// "allowlist", none without network.
func fetchImages(ctx context.Context, network state.Network, files []namedFile) *paramError {
	var client *http.Client
	for i := range files {
		f := &files[i]
		if f.fetch == "" {
			continue
		}
		if client == nil {
			switch network.Type {
			case "full":
				client = &http.Client{Timeout: fetchTimeout}
			case "allowlist":
				p, err := egress.New(network.AllowedDomains)
				if err != nil {
					return &paramError{err: err}
				}
				client = p.Client(fetchTimeout)
			default:
				return badParam(f.param, "the container has no network, so terp serve fetches no image for it: send the image as a data URL or a file_id, "+
					`or give the container a network_policy of {"type": "allowlist", "allowed_domains": [...]} that names the image's host`)
			}
		}
		b, mime, err := fetchImage(ctx, client, f.fetch)
		if err != nil {
			return badParam(f.param, fmt.Sprintf("cannot fetch the image %s: %v", f.fetch, err))
		}
		f.name += imageTypes[mime]
		f.data, f.image = b, "data:"+mime+";base64,"+base64.StdEncoding.EncodeToString(b)
	}
	return nil
}

// fetchImage GETs an image of a type a model takes, of at most
// maxShownImage bytes.
func fetchImage(ctx context.Context, client *http.Client, url string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("it answered %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxShownImage+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > maxShownImage {
		return nil, "", fmt.Errorf("it is larger than %d MiB", maxShownImage>>20)
	}
	mime := http.DetectContentType(b)
	if imageTypes[mime] == "" {
		return nil, "", fmt.Errorf("it is %s, not a PNG, JPEG, GIF or WebP image", mime)
	}
	return bytes.Clone(b), mime, nil
}
