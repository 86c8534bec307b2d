/**
 * The observation contract of the control plane: what an observation is (one exit seen at one
 * moment; its stream entry is defined once, runtime-neutral, in shared/geo/observation-wire.ts)
 * and where a path that learns exits hands one. A job or route records through an
 * `ObservationSink` (the process's ObservationRecorder, on the job and api deps), never through
 * the recorder's class, so what records depends only on this file.
 */
export {
  type Observation,
  OBSERVATION_SOURCES,
  ObservationSource,
} from "../../shared/geo/observation-wire.ts";
import type { Observation } from "../../shared/geo/observation-wire.ts";

/** Where observations go: memory only, never throwing, never waiting. */
export interface ObservationSink {
  /**
   * Takes one observation, handed over: the caller keeps no reference it changes afterwards. It
   * reaches the stream with the process's next publish (every 5 s, sooner when many wait).
   */
  record(observation: Observation): void;
}
