package libvirt

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// A VM gets what a container gets from its spec and its Configs and
// Secrets (files, environment, a command to run) through a config
// drive: a raw disk image the provider writes before each start and
// attaches read-only, whose virtio serial is "strata-config". Its bytes
// are a tar archive (archive/tar; no file system is needed in the guest,
// busybox `tar -x -f /dev/vdX` reads it):
//
//	env              export NAME='value' lines: the spec's env, envFrom over it
//	run              the command and args, as a shell script (absent: none)
//	mounts           the mount paths of the files, one a line; line n is files/n
//	files/<n>/<key>  a Config's key (0444) or a Secret's (0400)
//
// A VM with a command also gets an exit disk (serial "strata-exit"), a
// small raw disk zeroed before each start: the guest's init runs the
// command, writes "STRATA-EXIT <code>\n" at its start (with fsync) and
// powers off, and Status reports the code. Both files are the
// provider's (Config.DriveDir, traversable only; files 0600) and
// removed with the replica. Nothing of their content is logged.
const (
	driveSerial  = "strata-config"
	exitSerial   = "strata-exit"
	exitMarker   = "STRATA-EXIT "
	exitDiskSize = 64 << 10
)

// configDataKey carries an Apply's provider.ConfigData down to resolve.
type configDataKey struct{}

func configDataOf(ctx context.Context) *provider.ConfigData {
	d, _ := ctx.Value(configDataKey{}).(*provider.ConfigData)
	return d
}

// drives owns the VMs' config drives and exit disks: what each guest
// is given (its command, environment and files) and the code it exits
// with, in dir.
type drives struct {
	// dir is Config.DriveDir, by default a directory of this node's
	// under /run; configured says it is Config.DriveDir.
	dir        string
	configured bool
}

func newDrives(configured, node string) *drives {
	if configured != "" {
		return &drives{dir: configured, configured: true}
	}
	return &drives{dir: filepath.Join("/run/strata-libvirt", hostname(node))}
}

func (dr *drives) path(id string) string     { return filepath.Join(dr.dir, id+".config") }
func (dr *drives) exitPath(id string) string { return filepath.Join(dr.dir, id+".exit") }

// resolve adds the config drive and exit disk of a, if it needs
// them, to spec's disks, after its volumes.
func (dr *drives) resolve(ctx context.Context, a *api.Assignment, spec *domainSpec) error {
	c := a.Spec.Compute
	if c == nil {
		return nil
	}
	d := configDataOf(ctx)
	if d != nil && d.PullAuth != nil {
		return badSpec("a pull secret is for container images: a VM pulls none")
	}
	argv := slices.Concat(c.Command, c.Args)
	env := c.Env
	var files []provider.File
	if d != nil {
		env, files = d.Env, d.Files
	}
	if len(argv) == 0 && len(env) == 0 && len(files) == 0 {
		return nil
	}
	b, err := buildDrive(argv, c.WorkingDir, env, files)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	spec.Run = guestRun{drive: b, digest: hex.EncodeToString(sum[:12]), exit: len(argv) > 0}
	// After the volumes, which come after vda (the root disk's name,
	// with or without one).
	n := len(a.Volumes) + 1
	spec.Disks = append(spec.Disks, disk{Path: dr.path(a.ID), Format: "raw", Target: diskTarget(n), ReadOnly: true, Serial: driveSerial})
	if spec.Run.exit {
		spec.Disks = append(spec.Disks, disk{Path: dr.exitPath(a.ID), Format: "raw", Target: diskTarget(n + 1), Serial: exitSerial})
	}
	return nil
}

// buildDrive is the config drive's archive. Errors name paths and keys,
// never values.
func buildDrive(argv []string, workDir string, env map[string]string, files []provider.File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, data []byte) error {
		h := &tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("config drive %s: %w", name, err)
		}
		_, err := tw.Write(data)
		return err
	}
	var envText strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !api.ValidEnvName(k) {
			return nil, badSpec("environment variable %q is not a variable name", k)
		}
		fmt.Fprintf(&envText, "export %s=%s\n", k, shellQuote(env[k]))
	}
	if err := add("env", 0o600, []byte(envText.String())); err != nil {
		return nil, err
	}
	if len(argv) > 0 {
		if err := add("run", 0o700, []byte(runScript(argv, workDir))); err != nil {
			return nil, err
		}
	}
	if err := addFiles(add, files); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("config drive: %w", err)
	}
	// Whole 4 KiB blocks: a disk is sectors.
	if pad := buf.Len() % 4096; pad != 0 {
		buf.Write(make([]byte, 4096-pad))
	}
	return buf.Bytes(), nil
}

// addFiles adds the mounts list and the files, one directory per mount
// path.
func addFiles(add func(name string, mode int64, data []byte) error, files []provider.File) error {
	var dirs []string
	index := map[string]int{}
	for _, f := range files {
		n, ok := index[f.Dir]
		if !ok {
			if !path.IsAbs(f.Dir) || path.Clean(f.Dir) != f.Dir || f.Dir == "/" || strings.ContainsAny(f.Dir, "\n\x00") {
				return badSpec("file mount path %q must be a clean absolute path other than /", f.Dir)
			}
			n = len(dirs)
			index[f.Dir] = n
			dirs = append(dirs, f.Dir)
			if err := add("files/"+strconv.Itoa(n)+"/", 0o755, nil); err != nil {
				return err
			}
		}
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "/\x00") {
			return badSpec("file name %q (mount %s) is not a key", f.Name, f.Dir)
		}
		mode := int64(0o444)
		if f.Secret {
			mode = 0o400
		}
		if err := add("files/"+strconv.Itoa(n)+"/"+f.Name, mode, f.Data); err != nil {
			return err
		}
	}
	var list strings.Builder
	for _, d := range dirs {
		list.WriteString(d + "\n")
	}
	return add("mounts", 0o600, []byte(list.String()))
}

// runScript runs argv (in workDir, if set) with sh.
func runScript(argv []string, workDir string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	if workDir != "" {
		fmt.Fprintf(&b, "cd %s || exit 127\n", shellQuote(workDir))
	}
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// shellQuote quotes s for sh: between single quotes, each ' as '\”.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// write writes the drive and a zeroed exit disk of spec, before a
// start: the guest reads the drive, and an exit code on the exit disk
// is one of this start.
func (dr *drives) write(spec domainSpec) error {
	if spec.Run.drive == nil {
		return dr.remove(spec.ID)
	}
	if err := os.MkdirAll(dr.dir, 0o711); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	// Traverse only: QEMU's user opens its files by name, nobody lists.
	dirs := []string{dr.dir}
	if !dr.configured {
		dirs = append(dirs, filepath.Dir(dirs[0])) // /run/strata-libvirt
	}
	for _, d := range dirs {
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("config drive: %w", err)
		}
	}
	if err := writePrivate(dr.path(spec.ID), spec.Run.drive); err != nil {
		return fmt.Errorf("config drive: %w", err)
	}
	if !spec.Run.exit {
		return removeIfExists(dr.exitPath(spec.ID))
	}
	if err := writePrivate(dr.exitPath(spec.ID), make([]byte, exitDiskSize)); err != nil {
		return fmt.Errorf("exit disk: %w", err)
	}
	return nil
}

// writePrivate replaces path with data, mode 0600, through a file of its
// own (a running domain of another start never sees a half-written one).
func writePrivate(path string, data []byte) error {
	tmp := path + ".new"
	if err := removeIfExists(tmp); err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// remove removes the replica's drive and exit disk.
func (dr *drives) remove(id string) error {
	for _, f := range []string{dr.path(id), dr.path(id) + ".new", dr.exitPath(id), dr.exitPath(id) + ".new"} {
		if err := removeIfExists(f); err != nil {
			return fmt.Errorf("remove config drive: %w", err)
		}
	}
	return nil
}

// exitCode reads the code the guest wrote on the replica's exit disk
// since its latest start; ok is false when there is none.
func (dr *drives) exitCode(id string) (code int32, ok bool) {
	f, err := os.Open(dr.exitPath(id))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	b := make([]byte, 64)
	n, err := io.ReadFull(f, b)
	if err != nil && n == 0 {
		return 0, false
	}
	return parseExit(b[:n])
}

// parseExit parses "STRATA-EXIT <code>\n".
func parseExit(b []byte) (int32, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(exitMarker))
	if !ok {
		return 0, false
	}
	line, _, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 10, 32)
	if err != nil || v < 0 || v > 255 {
		return 0, false
	}
	return int32(v), true
}

// exited is the exit code of a stopped replica that runs to completion,
// if its guest wrote one.
func (dr *drives) exited(meta replicaMeta) (int32, bool) {
	if !meta.RunsToEnd || meta.Error != "" {
		return 0, false
	}
	return dr.exitCode(meta.ID)
}
