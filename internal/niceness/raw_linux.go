package niceness

// niceOf is the nice value of getpriority(2)'s raw return, which Linux's system call gives as
// 20 - nice.
func niceOf(raw int) int { return 20 - raw }
