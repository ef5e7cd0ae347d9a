package resources

// Names the external tests (package resources_test) check but the builders
// do not export.
const (
	VolumeTmp         = volumeTmp
	SeedBackoffLimit  = seedBackoffLimit
	WaitForPostgresSh = waitForPostgresSh
)

// Labels are the labels of g's pods.
var Labels = labels
