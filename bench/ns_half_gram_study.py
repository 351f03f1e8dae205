"""ns_half_gram_study.py - session 36's float64 emulation of Newton-Schulz with every stored
product rounded to bf16 (round to nearest even), the X iteration (A, P, X rounded) against the
Gram iteration of ns_gram_iter.c (G, Z_0, H, G_1, Z_1, W, X rounded), Polar Express deflated as
the library applies it, 5 steps; distance from the float64 iteration. Three parts, each with its
own seed (the figures quoted in docs/ALGORITHMS.md, "Ill-conditioned inputs with a half Gram"):
  1. geometric spectra (kappa 5..1000), 40 draws per row: where the Gram iteration diverges;
  2. one dominant singular value over a floor at 1/kappa (kappa 3..50, 3 draws each), Muon, its
     5-step schedule and Polar Express: 20 of 144 diverge with Polar Express, none with Muon's;
  3. the same inputs with the first k steps run alone (the X iteration's step) before the Gram
     iteration's pairs: tried, not kept (a 2 x 2 input of the fuzz test diverged that way).
Output: bench/results/2026-12-02-half-gram-study/output.txt.

    python3 bench/ns_half_gram_study.py      (~10 minutes on 2 cores)
"""
import numpy as np
def bf(a):
    a=np.asarray(a,dtype=np.float32); b=a.view(np.uint32).astype(np.uint64)
    b=((b+0x7FFF+((b>>16)&1))>>16)<<16
    return (b&0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64)
pe=[(8.28721201814563,-23.595886519098837,17.300387312530933),(4.107059111542203,-2.9478499167379106,0.5448431082926601),(3.9486908534822946,-2.908902115962949,0.5518191394370137),(3.3184196573706015,-2.488488024314874,0.51004894012372),(2.300652019954817,-1.6689039845747493,0.4188073119525673),(1.891301407787398,-1.2679958271945868,0.37680408948524835),(1.8750014808534479,-1.2500016453999487,0.3750001645474248)]
s_=np.float64(np.float32(1.01))
PE=[tuple(float(np.float32(v/s_**p)) for v,p in zip(t,(1,3,5))) for t in pe[:6]]+[pe[6]]
MU=[(3.4445,-4.7750,2.0315)]*7
def ns(z,tab):
    for a,b,c in tab:
        A=z@z.T; z=a*z+(b*A+c*A@A)@z
    return z
def xiter(z,tab):
    z=bf(z)
    for a,b,c in tab:
        A=bf(z@z.T); P=bf(b*A+c*A@A); z=bf(a*z+P@z)
    return z
def giter(z,tab):
    z=bf(z)
    for k in range(0,len(tab),2):
        (a0,b0,c0)=tab[k]; t1=tab[k+1] if k+1<len(tab) else None
        G=bf(z@z.T); Z0=bf(c0*G@G+b0*G)
        if t1:
            a1,b1,c1=t1
            H=bf(G@Z0+a0*G); G1=bf(Z0@H+a0*H); Z1=bf(c1*G1@G1+b1*G1); W=bf(Z0@Z1+a1*Z0); W=bf(W+a0*Z1); al=a0*a1
        else: W=Z0; al=a0
        z=bf(W@z+al*z)
    return z
rd=lambda a,b: np.linalg.norm(a-b)/np.linalg.norm(b)


def part1():
    rng=np.random.default_rng(7)
    for s,l in [(8,32),(8,512),(12,48),(16,64),(16,1024),(32,128)]:
      for kappa in [5,10,30,100,1000]:
        res=[]
        for trial in range(40):
            U,_=np.linalg.qr(rng.standard_normal((s,s))); V,_=np.linalg.qr(rng.standard_normal((l,s)))
            sv=np.geomspace(1,1/kappa,s); X=(U*sv)@V.T
            Z=X/(s_*np.linalg.norm(X)); ref=ns(Z.copy(),PE[:5])
            with np.errstate(all='ignore'):
              res.append((rd(xiter(Z,PE[:5]),ref), rd(giter(Z,PE[:5]),ref)))
        r=np.array(res)
        print(f"{s:3d}x{l:<5d} kappa {kappa:5d} PE: X max {np.max(r[:,0]):.2e} | GRAM med {np.nanmedian(r[:,1]):.2e} max {np.max(r[:,1]):.2e} diverged {np.sum(~(r[:,1]<1))}/40",flush=True)


def part2():
    MU5=[(4.0848,-6.8946,2.9270),(3.9505,-6.3029,2.6377),(3.7418,-5.5913,2.3037),(2.8769,-3.1427,1.2046),(2.8366,-3.0525,1.2012)]
    rng=np.random.default_rng(11)
    tabs={"muon":MU,"muon5":MU5,"pe":PE}
    for name in ["muon","muon5","pe"]:
      tab=tabs[name]
      for s,l in [(4,16),(16,64),(64,256)]:
        div=0; n=0; worst=0
        for kappa in [3,4,5,6,7,8,9,10,11,12,14,17,20,25,30,50]:
          for trial in range(3):
            U,_=np.linalg.qr(rng.standard_normal((s,s))); V,_=np.linalg.qr(rng.standard_normal((l,s)))
            sv=np.array([1.0]+[1.0/kappa]*(s-1))*(1+0.05*rng.standard_normal(s)); X=(U*sv)@V.T
            sf=s_ if name=="pe" else 1.0
            Z=X/(sf*np.linalg.norm(X)); ref=ns(Z.copy(),tab[:5])
            with np.errstate(all='ignore'):
              e=rd(giter(Z,tab[:5]),ref)
            n+=1; div+= not (e<1); worst=max(worst,e) if e==e else np.inf
        print(f"{name:6s} {s:3d}x{l:<4d}: Gram iteration bf16 diverged {div}/{n}, worst {worst:.3g}",flush=True)


def part3():
    def hybrid(z,tab,kx):
        z=bf(z)
        for a,b,c in tab[:kx]:
            A=bf(z@z.T); P=bf(b*A+c*A@A); z=bf(a*z+P@z)
        rest=tab[kx:]
        return giter(z,rest) if rest else z
    rng=np.random.default_rng(21)
    for s,l in [(4,16),(16,64),(64,256)]:
      for kx in [0,1,2]:
        div=0; n=0; worst=0; errs=[]
        for kappa in [3,4,5,6,7,8,9,10,11,12,14,17,20,25,30,50]:
          for trial in range(3):
            U,_=np.linalg.qr(rng.standard_normal((s,s))); V,_=np.linalg.qr(rng.standard_normal((l,s)))
            sv=np.array([1.0]+[1.0/kappa]*(s-1))*(1+0.05*rng.standard_normal(s)); X=(U*sv)@V.T
            Z=X/(s_*np.linalg.norm(X)); ref=ns(Z.copy(),PE[:5])
            with np.errstate(all='ignore'):
              e=rd(hybrid(Z,PE[:5],kx),ref); ex=rd(xiter(Z,PE[:5]),ref)
            n+=1; div+= not (e<1); errs.append(e/ex if e==e else np.inf)
        errs=np.array(errs)
        print(f"{s:3d}x{l:<4d} X for the first {kx} steps: diverged {div}/{n}; error / X iteration's: median {np.median(errs):.2f} max {np.max(errs):.3g}",flush=True)


if __name__ == "__main__":
    print("# part 1: geometric spectra, Polar Express", flush=True)
    part1()
    print("# part 2: one dominant singular value over a floor", flush=True)
    part2()
    print("# part 3: the first k steps alone, then pairs (not kept)", flush=True)
    part3()
