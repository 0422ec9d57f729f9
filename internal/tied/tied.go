// Package tied starts the child processes of tests and benchmarks so that
// they die with the process that started them, even when that process is
// killed and its cleanups never run: a killed test binary otherwise leaves
// its servers running, holding ports, files and CPU.
package tied
