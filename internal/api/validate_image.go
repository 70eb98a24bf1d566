package api

// The validation of an Image spec and its sources.

func (i *ImageSpec) validate() error {
	if err := i.validateSources(); err != nil {
		return err
	}
	for _, f := range []struct{ field, v string }{{"kernel", i.Kernel}, {"initrd", i.Initrd}, {"disk", i.Disk}} {
		if f.v == "" {
			continue
		}
		if err := validHostPath(f.field, f.v); err != nil {
			return err
		}
	}
	if i.Ref != "" {
		if err := validImage("ref", i.Ref); err != nil {
			return err
		}
	}
	if err := validText("cmdline", i.Cmdline, MaxCmdlineLen); err != nil {
		return err
	}
	return validText("readyMarker", i.ReadyMarker, 256)
}

// validateSources checks where the image comes from: a reference, an
// archive (with the reference inside it), a kernel (and initrd) or a disk.
func (i *ImageSpec) validateSources() error {
	if i.Ref == "" && i.Archive == "" && i.Kernel == "" && i.Disk == "" {
		return Invalid("", "needs one of ref (OCI reference), archive (OCI archive file or URL), kernel (direct boot) or disk (qcow2)")
	}
	if i.Archive != "" && i.Ref == "" {
		return Invalid("ref", "is required with archive: it names the image inside the archive")
	}
	if i.Initrd != "" && i.Kernel == "" {
		return Invalid("kernel", "is required with initrd")
	}
	if i.Archive != "" {
		return validArchive("archive", i.Archive)
	}
	return nil
}
