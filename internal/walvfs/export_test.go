package walvfs

// FailRun is failRun, for the tests.
var FailRun = failRun
