// Command seckill-proxy serves the Redis protocol: SECKILL.* stock commands itself, anything
// else passed through to the Redis Cluster. See README.md.
package main

import (
	"fmt"
	"os"

	"go.uber.org/zap"

	"seckill-proxy/conf"
)

func main() {
	cl, err := conf.ParseCommandLine("seckill-proxy", os.Args[1:], os.Environ(), os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cl.Done {
		return
	}
	log, err := cl.Config.Log.NewLogger()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer func() { _ = log.Sync() }()
	log.Error("seckill-proxy does not serve RESP yet", zap.String("listen", cl.Config.Listen))
	os.Exit(1)
}
