"""How many scorer actors a pool starts when the job leaves it to the pool (`--actors 0`, the default)."""
from jobs.plane.pool_sizing import pool_actors, weights_bytes
from jobs.plane.scoring_pool import ModelBranch, ScoringSpec

GIB = 1 << 30


def _model(tmp_path, name, size):
    d = tmp_path / name
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"\0" * size)
    (d / "config.json").write_text("{}")  # not a weight file: not counted
    return str(d)


def test_weights_bytes_counts_weight_files_only(tmp_path):
    m = _model(tmp_path, "m", 1000)
    assert weights_bytes(m) == 1000
    assert weights_bytes(str(tmp_path / "absent")) == 0
    assert weights_bytes("org/hub-model") == 0


def test_cpu_pool_takes_one_single_threaded_actor_per_cpu(tmp_path):
    m = _model(tmp_path, "m", 1000)
    assert pool_actors(ScoringSpec((ModelBranch(m, ("original",)),)), 2.0, 24 * GIB).actors == 2
    assert pool_actors(ScoringSpec((ModelBranch(m, ("original",)),)), 16.0, 24 * GIB).actors == 16
    # two models share the CPUs
    two = ScoringSpec((ModelBranch(m, ("original",)), ModelBranch(m, ("original",), rename_original="ref")))
    assert pool_actors(two, 4.0, 24 * GIB).actors == 2


def test_copies_of_the_weights_stay_within_a_quarter_of_memory(tmp_path):
    m = _model(tmp_path, "m", 1000)
    assert pool_actors(ScoringSpec((ModelBranch(m, ("original",)),)), 16.0, 4000 * 3).actors == 3
    assert pool_actors(ScoringSpec((ModelBranch(m, ("original",)),)), 16.0, 100).actors == 1


def test_explicit_gpu_served_and_unknown_models_keep_one_or_what_was_asked(tmp_path):
    m = _model(tmp_path, "m", 1000)
    branch = ModelBranch(m, ("original",))
    assert pool_actors(ScoringSpec((branch,), actors=3), 2.0, 24 * GIB).actors == 3
    assert pool_actors(ScoringSpec((branch,), gpus_per_actor=1.0), 16.0, 24 * GIB).actors == 1
    assert pool_actors(ScoringSpec((ModelBranch("served", ("original",), api={"base": "x"}),)), 16.0, GIB).actors == 1
    assert pool_actors(ScoringSpec((ModelBranch("org/hub-model", ("original",)),)), 16.0, GIB).actors == 1
