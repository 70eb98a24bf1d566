package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"strconv"
)

// maxHead bounds a response's status line and header fields together.
const maxHead = 64 << 10

var errMalformed = errors.New("malformed HTTP response")

// responseHead is what a check needs of a response's head.
type responseHead struct {
	status        int
	contentLength int64 // -1: not given
	chunked       bool
	location      string // for a redirect only
	http11        bool
	closes        bool // Connection: close
}

// response is what a check takes from a response.
type response struct {
	status   int
	location string
	// reusable is a response read to its end on a connection the
	// server keeps open.
	reusable bool
}

// readResponse reads a response to a GET: its status and, for a
// redirect, its Location, then at most maxBody of its body. It is
// net/http's ReadResponse cut to what a check looks at, so that a check
// allocates nothing here (but a redirect's Location): header fields are
// looked at in the reader's buffer and dropped. Informational (1xx)
// responses are skipped, as net/http's client skips them.
func readResponse(br *bufio.Reader) (response, error) {
	for {
		h, err := readHead(br)
		if err != nil {
			return response{}, err
		}
		if h.status >= 100 && h.status < 200 && h.status != 101 {
			continue
		}
		whole, err := drainBody(br, h)
		if err != nil {
			return response{}, err
		}
		return response{status: h.status, location: h.location, reusable: whole && h.http11 && !h.closes && h.status != 101}, nil
	}
}

func readHead(br *bufio.Reader) (responseHead, error) {
	h := responseHead{contentLength: -1}
	line, n, err := readLine(br, 0)
	if err != nil {
		return h, err
	}
	if h.status, err = parseStatusLine(line); err != nil {
		return h, err
	}
	h.http11 = bytes.HasPrefix(line, []byte("HTTP/1.1 "))
	for {
		line, n, err = readLine(br, n)
		if err != nil {
			return h, err
		}
		if len(line) == 0 {
			return h, nil
		}
		if err := h.field(line); err != nil {
			return h, err
		}
	}
}

// readLine returns the next line without its CRLF (valid until the next
// read). n counts the head's bytes so far; a line longer than the
// reader's buffer is an error, as a head longer than maxHead is.
func readLine(br *bufio.Reader, n int) ([]byte, int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, n, fmt.Errorf("%w: a header line longer than %d bytes", errMalformed, br.Size())
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, n, err
	}
	if n += len(line); n > maxHead {
		return nil, n, fmt.Errorf("%w: a head longer than %d bytes", errMalformed, maxHead)
	}
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	return line, n, nil
}

// parseStatusLine parses "HTTP/1.1 200 OK".
func parseStatusLine(line []byte) (int, error) {
	rest, ok := bytes.CutPrefix(line, []byte("HTTP/"))
	sp := bytes.IndexByte(rest, ' ')
	if !ok || sp < 0 || len(rest) < sp+4 || len(rest) > sp+4 && rest[sp+4] != ' ' {
		return 0, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
	}
	code := 0
	for _, c := range rest[sp+1 : sp+4] {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
		}
		code = code*10 + int(c-'0')
	}
	return code, nil
}

// field notes the header fields that frame the body and a redirect's
// target.
func (h *responseHead) field(line []byte) error {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return fmt.Errorf("%w: header line %q", errMalformed, clip(line))
	}
	value = bytes.TrimSpace(value)
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: Content-Length %q", errMalformed, clip(value))
		}
		h.contentLength = n
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		h.chunked = bytes.EqualFold(value, []byte("chunked"))
	case bytes.EqualFold(name, []byte("Location")) && h.status >= 300 && h.status < 400:
		h.location = string(value)
	case bytes.EqualFold(name, []byte("Connection")):
		h.closes = bytes.Contains(bytes.ToLower(value), []byte("close"))
	}
	return nil
}

// drainBody reads at most maxBody of the body, so that the server is
// not answered with a reset for a body it sent; a body it sends beyond
// that is not waited for. whole is a body read to its end, with the
// connection still open.
func drainBody(br *bufio.Reader, h responseHead) (whole bool, err error) {
	switch {
	case h.status == 204 || h.status == 304 || h.status == 101:
		return true, nil
	case h.chunked:
		_, err = io.CopyN(io.Discard, httputil.NewChunkedReader(br), maxBody)
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		return false, err
	case h.contentLength >= 0:
		_, err = br.Discard(int(min(h.contentLength, maxBody)))
		return err == nil && h.contentLength <= maxBody, err
	}
	// Framed by the connection's end: the request said close.
	_, err = io.CopyN(io.Discard, br, maxBody)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return false, err
}
