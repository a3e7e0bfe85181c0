"""What the trainers and the porting kit both stand on, and nothing else of this project:

  machine      the machine the bits were made on (CPU, instruction sets, oneDNN, versions,
               GPUs), which every run log, report and benchmark prints
  gates        TF1's arithmetic in TF2 where a tape and tf.distribute alone differ:
               gated_bias_add (a convolution bias with TF1's gated gradient) and replica_mean
               (replicas averaged as average_gradients averages towers)
  threads      the thread pools' counts, resolved as TensorFlow would and set explicitly,
               so a run's bits follow its settings, not the CPU set it lands on
  filesystems  whether TensorFlow has a filesystem for a path's URL scheme here
  quiet        TensorFlow's noise kept off every binary's screen (its import-time lines,
               the run-time notes of it doing what it should, deprecations of TF1 APIs)
  process_end  a binary's process ended at its last line: its threads and atexit handlers,
               then no interpreter finalization (the trainers' command line and the kit's)
  errors       OneLineError: what every binary shows as `error: <message>`, exit 2 (cifar10's
               UsageError and porting's PortError are both)

It imports only the standard library, absl, numpy and TensorFlow (1.15 included: the recorder
installs it beside `porting`), so a change to the kit for a team's model cannot change the
trainers' bits, nor a change to the trainers the kit's.
"""
