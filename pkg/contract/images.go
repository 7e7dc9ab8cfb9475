package contract

// The project's images: kindconfig/images.sh builds every cmd/svclb-<name> into
// ImageRepo/<name>:ImageTag in the local Docker engine, e2e/perf/run.sh builds the perf client.
const (
	ImageAgent      = "agent"
	ImageNodeProxy  = "nodeproxy"
	ImageCapture    = "capture"
	ImageEcho       = "echo"
	ImageGuard      = "guard"
	ImageCNI        = "cni"
	ImageNodeExec   = "nodeexec"
	ImagePerfClient = "perf-client"

	// ImageRepo and ImageTag spell an image's local reference: ImageRepo/<name>:ImageTag.
	ImageRepo = "svclb"
	ImageTag  = "dev"

	// RegistryEnv is the suites' one image setting: empty, the images are kind-loaded and
	// never pulled; a registry host[:port][/path], the clusters pull <registry>/svclb/<name>:dev.
	RegistryEnv = "SVCLB_REGISTRY"
)

// SuiteImages are the images the acceptance legs deploy: what `svclb-e2e images push`
// pushes (the perf client too, when it is built).
var SuiteImages = []string{ImageAgent, ImageNodeProxy, ImageCapture, ImageEcho, ImageGuard, ImageCNI, ImageNodeExec}
