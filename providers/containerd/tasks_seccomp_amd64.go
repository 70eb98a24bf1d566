package containerd

const isAMD64 = true
