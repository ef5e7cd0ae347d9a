package resources

// Names the external tests (package resources_test) check but the builders
// do not export.
const InitScript = initScript
