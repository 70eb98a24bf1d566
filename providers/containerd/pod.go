package containerd

// The containers of a pod: the main container keeps the replica's own
// container and task id, so that a replica made before pods is the
// one-container pod it always was; the others are <id>.<name>, the init
// containers <id>.init-<name>. All of them join the replica's pinned
// network namespace, the pod's sandbox.

// sidecarID is the containerd id of the pod container name of replica id.
func sidecarID(id, name string) string { return id + "." + name }

// initID is the containerd id of the init container name of replica id.
func initID(id, name string) string { return id + ".init-" + name }
