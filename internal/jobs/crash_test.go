package jobs

func runChildWorker() int { return 0 }
