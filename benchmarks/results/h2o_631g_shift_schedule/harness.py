"""Experiment harness: one H2O/6-31G teacher fit, then SR variants from it (one thread each).
    python h2o.py fit                 -> /tmp/exp/fit.pt
    python h2o.py run NAME k=v ...    -> /tmp/exp/NAME.csv (step,error_mha,grad_norm,t_grad)
"""
import sys, time, json
from dataclasses import replace
import torch
sys.path.insert(0, "/work/main")
from hamiltonians import get_spec, build_hamiltonian
from benchmarks.accuracy import parse_settings
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.run import make_wavefunction, pretrain
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.driver import new_state, run_vmc
from nnqs.vmc.selection import core_energies

torch.set_num_threads(1)
E_FCI = -76.12087645165568
spec = get_spec("H2O", basis="6-31g")
ham = build_hamiltonian(spec)
mode = sys.argv[1]
if mode == "fit":
    cfg = VMCConfig(threads=1, steps=80)
    wf = make_wavefunction(ham, cfg)
    compact = CompactHamiltonian.from_molecular(ham, wf.device)
    t = time.perf_counter()
    out = pretrain(wf, compact, cfg, True)
    torch.save({"model": wf.state_dict(), "configs": out["configs"]}, "/tmp/exp/fit.pt")
    print("fit", time.perf_counter() - t, out["e_teacher_sci"])
else:
    name = sys.argv[2]
    cfg = replace(VMCConfig(threads=1, steps=80), **parse_settings(sys.argv[3:]))
    fit = torch.load("/tmp/exp/fit.pt", weights_only=True)
    wf = make_wavefunction(ham, cfg)
    wf.load_state_dict(fit["model"])
    compact = CompactHamiltonian.from_molecular(ham, wf.device)
    state = new_state(wf, cfg)
    state.core = fit["configs"]
    fh = open(f"/tmp/exp/{name}.csv", "w")
    fh.write("step,error_mha,grad_norm,t_grad\n")
    def cb(r, s):
        fh.write(f"{r.step},{1000*(r.energy-E_FCI):.4f},{r.grad_norm:.3f},{r.t_grad:.2f}\n"); fh.flush()
    t = time.perf_counter()
    run_vmc(state, compact, cfg, [cb])
    res = {k: 1000 * (v - E_FCI) for k, v in core_energies(wf, compact, state.core, cfg.max_batch).items()}
    res["wall_steps"] = time.perf_counter() - t
    fh.write("# " + json.dumps(res) + "\n"); fh.close()
