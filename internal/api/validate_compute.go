package api

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// The validation of a Compute spec (a container or a VM): its command,
// security context, ports, mounts and environment; what a pod adds (its
// containers, scratch volumes and probes) is checked by validatePod, in
// pod.go beside its types.

func (c *ComputeSpec) validate() error {
	var p problems
	if strings.TrimSpace(c.Image) == "" {
		p.add(Invalid("image", "is required"))
	} else {
		p.add(validImage("image", c.Image))
	}
	p.add(validateEnv("env", c.Env))
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		p.add(Invalid("workingDir", "%q must be an absolute path", c.WorkingDir))
	} else {
		p.add(validText("workingDir", c.WorkingDir, MaxPathLen))
	}
	p.add(validateArgv(c.Command, c.Args))
	p.add(validText("kernelArgs", c.KernelArgs, MaxCmdlineLen))
	p.add(validatePorts(c.Ports))
	p.add(validateMounts(c.Volumes))
	if c.Network != "" {
		p.add(ValidateName("network", c.Network))
	}
	p.add(oneOf("restartPolicy", c.RestartPolicy, "", RestartAlways, RestartOnFailure, RestartNever))
	p.add(c.validateConfigRefs())
	if c.StopGracePeriod.Duration < 0 {
		p.add(Invalid("stopGracePeriod", "must not be negative"))
	}
	if sc := c.SecurityContext; sc != nil {
		p.add(within("securityContext", sc.validate()))
	}
	p.add(c.validatePod())
	return p.err()
}

func (sc *SecurityContext) validate() error {
	var p problems
	for _, id := range []struct {
		field string
		v     *int64
	}{{"runAsUser", sc.RunAsUser}, {"runAsGroup", sc.RunAsGroup}} {
		if id.v != nil && (*id.v < 0 || *id.v > MaxUserID) {
			p.add(Invalid(id.field, "%d is not an id (0-%d)", *id.v, MaxUserID))
		}
	}
	if sc.RunAsNonRoot && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		p.add(Invalid("runAsUser", "0 is root, which runAsNonRoot refuses"))
	}
	return p.err()
}

// validateArgv checks a command and its arguments. They may hold
// newlines and tabs (a shell script); a NUL ends a C string, so the
// process would run something else than asked, and terminal escapes and
// bidirectional overrides make what an operator reads differ from what
// runs.
func validateArgv(command, args []string) error {
	var p problems
	for _, list := range []struct {
		field string
		argv  []string
	}{{"command", command}, {"args", args}} {
		for i, a := range list.argv {
			p.add(validScript(fmt.Sprintf("%s[%d]", list.field, i), a))
		}
	}
	return p.err()
}

// validScript refuses the control characters of hasControl but newline
// and tab, which scripts and values hold.
func validScript(field, s string) error {
	bad := strings.IndexFunc(s, func(r rune) bool { return r != '\n' && r != '\t' && isControl(r) })
	if bad < 0 {
		return nil
	}
	if s[bad] == 0 {
		return Invalid(field, "has a NUL character")
	}
	r, _ := utf8.DecodeRuneInString(s[bad:])
	return Invalid(field, "has the control character %U at byte %d (only newline and tab are allowed)", r, bad)
}

// validatePorts checks a container's ports, each listed once.
func validatePorts(ports []PortSpec) error {
	seen := map[string]bool{}
	for i, p := range ports {
		f := fmt.Sprintf("ports[%d]", i)
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			return Invalid(f+".containerPort", "%d is not a port (1-65535)", p.ContainerPort)
		}
		if p.HostPort < 0 || p.HostPort > 65535 {
			return Invalid(f+".hostPort", "%d is not a port (1-65535)", p.HostPort)
		}
		if err := oneOf(f+".protocol", p.Protocol, "", "tcp", "udp"); err != nil {
			return err
		}
		key := fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol)
		if seen[key] {
			return Invalid(f, "port %s is listed twice", key)
		}
		seen[key] = true
	}
	return nil
}

// validateMounts checks a container's volume mounts, each path once.
func validateMounts(mounts []VolumeMount) error {
	paths := map[string]bool{}
	for i, v := range mounts {
		f := fmt.Sprintf("volumes[%d]", i)
		if v.Scratch != "" {
			return Invalid(f+".scratch", "the main container mounts a scratch volume by its scratchVolumes[].path; scratch is for the other containers")
		}
		if err := ValidateName(f+".volume", v.Volume); err != nil {
			return err
		}
		if !path.IsAbs(v.Path) || path.Clean(v.Path) == "/" {
			return Invalid(f+".path", "%q must be an absolute path other than /", v.Path)
		}
		if err := validText(f+".path", v.Path, MaxPathLen); err != nil {
			return err
		}
		if paths[path.Clean(v.Path)] {
			return Invalid(f+".path", "%q is mounted twice", v.Path)
		}
		paths[path.Clean(v.Path)] = true
	}
	return nil
}

func validateEnv(field string, env map[string]string) error {
	if len(env) > MaxEnv {
		return Invalid(field, "has %d variables; at most %d", len(env), MaxEnv)
	}
	var p problems
	for _, k := range sortedKeys(env) {
		if len(k) > MaxEnvNameLen || !envKeyRE.MatchString(k) {
			p.add(Invalid(field, "bad variable name %q: at most %d letters, digits and '_', not starting with a digit", k, MaxEnvNameLen))
			continue
		}
		p.add(validScript(field+"."+k, env[k]))
	}
	return p.err()
}
