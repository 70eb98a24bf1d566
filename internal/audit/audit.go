// Package audit is the audit log: one JSON line per call that changes
// something (REST and gRPC, on every tier that has audit.path set), and
// per read that returns what is worth knowing who read (a tier says
// which: the global tier's are secret values, replicas' logs and another
// tenant's objects), saying who made it, what it was, when, and how it
// ended.
//
// An entry names the caller by its token's id and name, tenant and role,
// or its certificate identity; never by a token, a secret or a request
// body, which may carry tenants' environment values.
//
// The file is rotated by size (path.1 is the newest old file, up to
// MaxBackups of them), and reopened by Reopen, which the tiers call on
// SIGHUP, for operators who rotate it with logrotate instead.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/stratahq/strata/internal/config"
)

// Entry is one audited call.
type Entry struct {
	Time time.Time `json:"time"`
	// Tier is the process that served the call: "global:<id>",
	// "region:<name>".
	Tier string `json:"tier"`
	Who  Who    `json:"who"`
	// Method is the HTTP method, or "gRPC".
	Method string `json:"method"`
	// Path is the URL path (without its query), or the gRPC method.
	Path string `json:"path"`
	// Object names what a gRPC call was about ("tenant/name"), when its
	// request says.
	Object string `json:"object,omitempty"`
	// Tenant is the tenant whose objects the call acted on or read, when
	// the call is of one tenant's (it may be another than the caller's).
	Tenant string `json:"tenant,omitempty"`
	// Reads says why a read was recorded, what it returned or tried to
	// (ReadSecretValues, ReadLogs, ReadOtherTenant); empty for a call
	// that changes something, which is recorded whatever it reads.
	Reads []string `json:"reads,omitempty"`
	// Status is the HTTP status; for gRPC, the status code's name is in
	// Code.
	Status int    `json:"status,omitempty"`
	Code   string `json:"code,omitempty"`
	// Remote is the client's address.
	Remote     string  `json:"remote,omitempty"`
	DurationMS float64 `json:"durationMs"`
}

// Why a read is recorded (Entry.Reads).
const (
	// ReadSecretValues: the values of Secrets (never in the entry).
	ReadSecretValues = "secretValues"
	// ReadLogs: a replica's log output, which may hold anything the
	// workload prints.
	ReadLogs = "logs"
	// ReadOtherTenant: objects of a tenant other than the caller's
	// (Entry.Tenant names it).
	ReadOtherTenant = "otherTenant"
)

// Who is the caller of an audited call: a token (its id and name, never
// the token), or a certificate identity, or nobody known (a refused
// call without valid credentials).
type Who struct {
	TokenID   string `json:"tokenId,omitempty"`
	TokenName string `json:"tokenName,omitempty"`
	Tenant    string `json:"tenant,omitempty"`
	Role      string `json:"role,omitempty"`
	// Identity is a certificate identity ("global:g1"), or "region-token"
	// for the holder of a region's operator token.
	Identity string `json:"identity,omitempty"`
}

// Options shape a Log.
type Options struct {
	// MaxBytes rotates the file when it would grow past it; 0 never.
	MaxBytes int64
	// MaxBackups is how many rotated files are kept (path.1 ...
	// path.N); 0 keeps one.
	MaxBackups int
	// Logger reports failures to write the log; the default discards.
	Logger *slog.Logger
}

// Log appends entries to a file. A nil *Log records nothing, so a tier
// without audit.path passes nil around.
type Log struct {
	path string
	o    Options
	log  *slog.Logger

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (creating, mode 0600) the audit file at path for appending.
func Open(path string, o Options) (*Log, error) {
	l := &Log{path: path, o: o, log: o.Logger}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.o.MaxBackups <= 0 {
		l.o.MaxBackups = 1
	}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", l.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: stat %s: %w", l.path, err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Record appends e. It never fails the call it records: a write error
// is logged (the entry's path and status, nothing more).
func (l *Log) Record(e Entry) {
	if l == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		l.log.Error("audit: encode entry", "path", e.Path, "err", err)
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.o.MaxBytes > 0 && l.size > 0 && l.size+int64(len(b)) > l.o.MaxBytes {
		if err := l.rotateLocked(); err != nil {
			l.log.Error("audit: rotate", "file", l.path, "err", err)
		}
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			l.log.Error("audit: entry lost", "path", e.Path, "status", e.Status, "code", e.Code, "err", err)
			return
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil {
		l.log.Error("audit: entry lost", "path", e.Path, "status", e.Status, "code", e.Code, "err", err)
	}
}

// rotateLocked shifts path.N-1 → path.N ... path → path.1 and opens a
// new path.
func (l *Log) rotateLocked() error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	for i := l.o.MaxBackups - 1; i >= 1; i-- {
		if err := os.Rename(l.backup(i), l.backup(i+1)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := os.Rename(l.path, l.backup(1)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return l.open()
}

func (l *Log) backup(i int) string { return l.path + "." + strconv.Itoa(i) }

// Reopen closes the file and opens path again: after logrotate moved it
// away (SIGHUP).
func (l *Log) Reopen() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	return l.open()
}

// Close closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Mutating reports whether an HTTP method changes something: what the
// REST edges audit.
func Mutating(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS":
		return false
	}
	return true
}

// OpenConfigured opens the audit log c configures: nil, and no error,
// when c has no path.
func OpenConfigured(c config.Audit, log *slog.Logger) (*Log, error) {
	if c.Path == "" {
		return nil, nil
	}
	return Open(c.Path, Options{MaxBytes: int64(c.MaxSizeMB) << 20, MaxBackups: c.MaxBackups, Logger: log})
}

// ReopenOnHangup reopens l on every SIGHUP until ctx is done, for
// logrotate's postrotate. The owner closes l once its servers are done.
func (l *Log) ReopenOnHangup(ctx context.Context, log *slog.Logger) error {
	if l == nil {
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			if err := l.Reopen(); err != nil {
				log.Error("audit: reopen after SIGHUP", "file", l.path, "err", err)
			} else {
				log.Info("audit: reopened after SIGHUP", "file", l.path)
			}
		}
	}
}
