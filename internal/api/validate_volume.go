package api

// The validation of a Volume spec.

func (v *VolumeSpec) validate() error {
	if v.SizeMiB <= 0 {
		return Invalid("sizeMiB", "must be greater than 0")
	}
	if err := oneOf("format", v.Format, "", VolumeDir, VolumeQcow2, VolumeRaw); err != nil {
		return err
	}
	if err := oneOf("provider", v.Provider, "", ProviderContainer, ProviderVM); err != nil {
		return err
	}
	if v.Provider == ProviderContainer && v.Format != "" && v.Format != VolumeDir {
		return Invalid("format", "a container volume is a directory (format \"dir\"), not %q", v.Format)
	}
	if v.Provider == ProviderVM && v.Format == VolumeDir {
		return Invalid("format", "a VM volume is a disk: \"qcow2\" or \"raw\"")
	}
	return nil
}
