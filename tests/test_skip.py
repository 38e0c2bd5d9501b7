"""rnnbook.skip: the skip update, the three families of decisions, the clock, the update rate."""

import math

import pytest
import torch

from rnnbook import skip


def test_a_skipped_unit_keeps_its_state_exactly_and_an_updated_one_takes_the_candidate():
    previous = torch.randn(3, 4, dtype=torch.float64)
    candidate = torch.randn(3, 4, dtype=torch.float64)
    update = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    h = skip.skip_update(candidate, previous, update)
    assert torch.equal(h[:, [1, 3]], previous[:, [1, 3]])  # a copy: bitwise
    assert torch.equal(h[:, [0, 2]], candidate[:, [0, 2]])


def test_the_gradient_through_a_skipped_step_is_the_identity():
    previous = torch.randn(2, 3, dtype=torch.float64)
    update = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(
        lambda p: skip.skip_update(torch.tanh(p @ torch.eye(3, dtype=p.dtype)), p, update),
        previous,
    )
    for j in (0, 2):  # skipped units: d h_t / d h_{t-1} is 1 on itself, 0 elsewhere
        assert jac[0, j, 0, j] == 1 and jac[0, j].abs().sum() == 1


@pytest.mark.parametrize(
    "periods, u_inf, u_35",
    [
        ((1, 2, 4, 8, 16, 32, 64, 128), 0.2490, 0.2643),
        ((1, 4, 16, 64), 0.3320, 0.3429),
        ((1, 2, 4, 8, 12), 0.3917, 0.4000),
        ((1, 2, 3, 4, 5), 0.4567, 0.4629),
        ((1, 1, 2, 4, 8), 0.5750, 0.5829),
        ((1, 1, 1, 1, 1), 1.0, 1.0),
        ((1, 2, 4, 8), 0.4688, 0.4786),
    ],
)
def test_update_rates_of_the_source_period_sets(periods, u_inf, u_35):
    assert skip.asymptotic_update_rate(periods) == pytest.approx(u_inf, abs=5e-5)
    assert skip.window_update_rate(periods, 35) == pytest.approx(u_35, abs=5e-5)


def test_the_clock_ticks_when_t_plus_t0_is_a_multiple_of_the_period():
    periods = (1, 2, 3, 8)
    for t0 in (0, 1, 5):
        ticks = skip.clock(periods, 30, t0)
        for t in range(30):
            for m, T in enumerate(periods):
                assert bool(ticks[t, m]) == ((t + t0) % T == 0)
    assert torch.equal(skip.clock(periods, 50, skip.lcm(periods)), skip.clock(periods, 50, 0))


def test_update_rate_on_hand_made_decisions():
    d = torch.tensor([[[1, 0], [0, 0]], [[1, 1], [1, 0]]])  # (B=2, L=2, H=2): 4 of 8
    assert skip.update_rate(d) == 0.5
    valid = torch.tensor([[[1], [0]], [[1], [1]]])  # the first sequence has one step
    assert skip.update_rate(d, valid) == pytest.approx(4 / 6)
    assert skip.update_rate(torch.ones(3, 5, 7)) == 1.0
    assert skip.update_rate(d.bool()) == 0.5  # booleans count as well


def test_the_update_rate_counts_units_so_module_decisions_are_expanded():
    modules = torch.tensor([[[1, 0, 0, 0]]])  # one module of four ticks
    assert skip.update_rate(modules) == 0.25
    # modules of equal size: the unit rate equals the module rate
    assert skip.update_rate(skip.expand_modules(modules, 3)) == 0.25


def test_the_update_rate_of_a_clock_is_its_window_rate():
    periods, H, L = (1, 2, 4, 8), 16, 35
    units = skip.clock(periods, L)[:, skip.module_of_unit(H, len(periods))]
    assert skip.update_rate(units) == pytest.approx(skip.window_update_rate(periods, L))


def test_bernoulli_decisions_update_at_rate_p():
    g = torch.Generator().manual_seed(0)
    u = skip.bernoulli_decision((200, 500), 0.3, generator=g)
    assert abs(skip.update_rate(u) - 0.3) < 0.01
    assert torch.equal(
        u, skip.bernoulli_decision((200, 500), 0.3, torch.Generator().manual_seed(0))
    )


def test_a_decision_per_module_is_shared_by_the_module_units():
    b = torch.tensor([[1.0, 0.0, 1.0]])  # (B=1, M=3)
    units = skip.expand_modules(b, 2)
    assert units.tolist() == [[1, 1, 0, 0, 1, 1]]
    previous, candidate = torch.zeros(1, 6), torch.ones(1, 6)
    assert skip.skip_update(candidate, previous, units).tolist() == [[1, 1, 0, 0, 1, 1]]
    # a decision per layer broadcasts: (B, 1)
    per_layer = skip.skip_update(candidate, previous, torch.tensor([[0.0]]))
    assert torch.equal(per_layer, previous)


def test_the_unit_clock_spreads_the_module_clock_over_the_units():
    periods = (1, 2, 4)
    units = skip.unit_clock(periods, 6, 8, t0=1)
    assert units.shape == (8, 6) and units.dtype == torch.float32
    assert torch.equal(units, skip.expand_modules(skip.clock(periods, 8, 1).float(), 2))
    assert units[:, 4].tolist() == [0, 0, 0, 1, 0, 0, 0, 1]  # T = 4 from t0 = 1: t = 3, 7


def test_the_threshold_decision_passes_the_gradient_straight_through():
    score = torch.tensor([0.2, 0.9, 1.5], requires_grad=True)
    u = skip.threshold_decision(score, 1.0)
    assert u.tolist() == [0.0, 0.0, 1.0]
    (u * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert score.grad.tolist() == [1.0, 2.0, 3.0]


def test_a_learned_threshold_gets_the_negative_summed_gradient():
    score = torch.tensor([[0.2, 0.9], [1.5, -1.0]])
    theta = torch.tensor(0.5, requires_grad=True)  # one threshold for every unit
    b = skip.threshold_decision(score, theta)
    assert b.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    b.sum().backward()
    assert theta.grad.item() == -4.0  # d b / d theta := -1 at every element, summed
    per_unit = torch.tensor([0.0, 1.0], requires_grad=True)  # (H,), broadcast over B
    skip.threshold_decision(score, per_unit).sum().backward()
    assert per_unit.grad.tolist() == [-2.0, -2.0]


@pytest.mark.parametrize("M", [1, 2, 4, 8])
def test_the_uni_mask_keeps_m_plus_1_over_2m_of_the_weights(M):
    mask = skip.connectivity_mask(8 * M, M, "uni")
    assert mask.mean().item() == pytest.approx((M + 1) / (2 * M))
    assert skip.connectivity_mask(8 * M, M, "bi").mean() == 1


def test_the_uni_mask_lets_a_module_read_itself_and_slower_modules_only():
    mask = skip.connectivity_mask(6, 3, "uni")  # modules of 2 units
    # row = destination, column = source: module 0 reads 0, 1, 2; module 2 reads only 2
    assert mask[0].tolist() == [1, 1, 1, 1, 1, 1]
    assert mask[5].tolist() == [0, 0, 0, 0, 1, 1]
    assert mask[2].tolist() == [0, 0, 1, 1, 1, 1]


def test_unchanged_share_counts_exact_copies_only():
    states = torch.zeros(3, 1, 4, dtype=torch.float64)  # (T + 1, B, H)
    states[1] = torch.tensor([0.0, 0.0, 1.0, 1e-300], dtype=torch.float64)  # 2 kept, 2 moved
    states[2] = states[1]  # every unit kept
    assert skip.unchanged_share(states) == 6 / 8


def test_explained_share_on_hand_made_groups():
    values = torch.tensor([1.0, 1.0, 3.0, 3.0])
    assert skip.explained_share(values, torch.tensor([0, 0, 1, 1]), min_count=1) == 1.0
    assert skip.explained_share(values, torch.tensor([0, 1, 0, 1]), min_count=1) == 0.0
    # means 1.5 and 2.5 around 2: between 4 * 0.25 = 1, total 4 * 1 = 4
    assert skip.explained_share(values, torch.tensor([0, 1, 1, 0]), min_count=1) == 0.0
    assert skip.explained_share(torch.tensor([1.0, 2.0, 2.0, 3.0]), torch.tensor([0, 0, 1, 1]),
                                min_count=1) == 0.5  # fmt: skip


def test_explained_share_leaves_out_small_groups_and_is_near_chance_for_noise():
    values = torch.tensor([1.0, 3.0, 1.0, 3.0, 100.0])
    groups = torch.tensor([0, 0, 1, 1, 2])  # group 2 has one member and is left out
    assert skip.explained_share(values, groups, min_count=2) == 0.0
    g = torch.Generator().manual_seed(0)
    noise, labels = torch.rand(20_000, generator=g), torch.randint(0, 50, (20_000,), generator=g)
    assert skip.explained_share(noise, labels) < 3 * 49 / 19_999  # chance: (k - 1) / (n - 1)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: skip.clock((2, 1), 5), "not decrease"),
        (lambda: skip.clock((1, 0), 5), "positive integer"),
        (lambda: skip.clock((), 5), "at least one module"),
        (lambda: skip.clock((1, 2), 5, t0=-1), "t0"),
        (lambda: skip.clock((1, 2), 5, t0=1.0), "t0"),
        (lambda: skip.clock((1, 2.5), 5), "positive integer"),
        (lambda: skip.clock((1, 2), 0), "L must be a positive integer"),
        (lambda: skip.unit_clock((1, 2), 5, 3), "equal modules"),
        (lambda: skip.expand_modules(torch.tensor(1.0), 2), "last dimension"),
        (lambda: skip.expand_modules(torch.ones(2), 0), "module_size"),
        (lambda: skip.module_of_unit(10, 3), "equal modules"),
        (lambda: skip.connectivity_mask(4, 2, "full"), "connectivity"),
        (lambda: skip.update_rate(torch.tensor([0.5, 1.0])), "0 \\(skip\\) or 1"),
        (lambda: skip.update_rate(torch.ones(2), torch.zeros(2)), "no step"),
        (lambda: skip.bernoulli_decision((2,), 1.5), "\\[0, 1\\]"),
        (lambda: skip.skip_update(torch.ones(2, 3), torch.ones(2, 4), torch.ones(3)), "one shape"),
        (lambda: skip.skip_update(torch.ones(2, 3), torch.ones(2, 3), torch.ones(4)), "broadcast"),
        (lambda: skip.unchanged_share(torch.ones(1, 2, 3)), "at least one"),
        (lambda: skip.unchanged_share(torch.ones(2, 3)), "states"),
        (
            lambda: skip.explained_share(torch.ones(3), torch.zeros(4, dtype=torch.long)),
            "one shape",
        ),
        (lambda: skip.explained_share(torch.ones(2), torch.zeros(2)), "integer labels"),
        (lambda: skip.explained_share(torch.ones(2), torch.tensor([0, 1])), "fewer than two"),
        (lambda: skip.explained_share(torch.ones(4), torch.tensor([0, 0, 1, 1]), 1), "not vary"),
        (lambda: skip.explained_share(torch.ones(2), torch.tensor([0, 0]), 0), "min_count"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_lcm_of_periods():
    assert skip.lcm((1, 2, 3, 4, 5)) == 60 == math.lcm(1, 2, 3, 4, 5)


@pytest.mark.parametrize(
    "u, u_min, expected",
    [(0.44, 0.05, 0.39), (0.03, 0.05, -0.02), (100.0, 0.05, 100.0), (0.05, 0.05, 0.0)],
)
def test_effective_update_rate_matches_the_source(u, u_min, expected):
    assert abs(skip.effective_update_rate(u, u_min) - expected) < 0.005


def test_effective_update_rate_limits():
    assert skip.effective_update_rate(2.5, 2.5) == 0.0  # at the bound
    assert skip.effective_update_rate(37.0, 0.0) == 37.0  # no bound: u itself
    lowest = skip.effective_update_rate(0.0, 5.0)
    assert math.isclose(lowest, -100 * 5.0 / (100 - 5.0))  # the bottom of Eq. 9.13's range


def test_lower_bounds_of_the_source_in_the_padded_convention():
    bounds = skip.update_rate_lower_bounds(20, 100)
    assert bounds == {"s": 1 / 20, "q": 1 / 100, "w": 1 / 2000}  # 5 %, 1 %, 0.05 %
    halved = skip.update_rate_lower_bounds(20, 100, one_direction=True)
    assert halved == {key: value / 2 for key, value in bounds.items()}  # 2.5 %, 0.5 %, 0.025 %
    assert skip.update_rate_lower_bounds(10, 12, L_q=6)["q"] == 1 / 6


def test_lower_bounds_in_the_real_token_convention():
    doc = torch.zeros(2, 3, 4, dtype=torch.long)
    doc[0, 0, :3] = 5  # document 0: 3 + 2 real tokens in 2 sentences
    doc[0, 2, :2] = 6
    doc[1, 1, :4] = 7  # document 1: 4 real tokens in 1 sentence
    query = torch.tensor([[1, 2, 0, 0], [3, 0, 0, 0]])
    bounds = skip.real_token_update_rate_lower_bounds(doc, query)
    assert bounds == {"s": 2 / 3, "q": 2 / 3, "w": 2 / 9}
    halved = skip.real_token_update_rate_lower_bounds(doc, query, one_direction=True)
    assert halved == {"s": 1 / 3, "q": 1 / 3, "w": 1 / 9}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: skip.effective_update_rate(0.5, 100.0), "u_min must be a percentage"),
        (lambda: skip.effective_update_rate(101.0, 0.05), "u must be a percentage"),
        (lambda: skip.effective_update_rate(float("nan"), 0.05), "u must be a number"),
        (lambda: skip.update_rate_lower_bounds(0, 100), "S must be a positive integer"),
        (lambda: skip.update_rate_lower_bounds(20, 100, L_q=0), "L_q must be"),
        (
            lambda: skip.real_token_update_rate_lower_bounds(
                torch.zeros(2, 3, 4, dtype=torch.long), torch.ones(2, 4, dtype=torch.long)
            ),
            "every entry is PAD",
        ),
        (
            lambda: skip.real_token_update_rate_lower_bounds(
                torch.ones(2, 3, 4, dtype=torch.long), torch.ones(3, 4, dtype=torch.long)
            ),
            "same N",
        ),
    ],
)
def test_bad_bound_arguments_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
