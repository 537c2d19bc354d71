// Command pause is the process every pod sandbox holds its namespaces with (the "pause"
// container). The upstream image comes from a registry this machine cannot reach, and all it
// has to do fits here: sleep until told to stop, and reap the orphans it inherits as PID 1 of a
// pod that shares its process namespace.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
