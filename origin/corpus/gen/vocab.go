package gen

import "strings"

// families is the vocabulary the corpus is written from. One line per subject
// family: the tiers it is taught in (canonical order), its slug, display name,
// area (which picks sentence templates) and its own topic terms. A family in
// several tiers gives one subject per tier with the same slug and different
// content (other term order, tier-specific phrasing, other class count).
// The terms are what make search selective: they appear in class titles,
// card labels, key points and quiz questions of this family only.
const familyData = `
topics|personal-finance|Personal Finance|econ|emergency fund, compound interest, credit score, index fund, household budget, sinking fund, debt avalanche, debt snowball, amortization schedule, expense ratio, retirement account, employer match, net worth statement, insurance deductible, tax bracket, cash flow plan, dollar-cost averaging, asset allocation, rebalancing, inflation hedge
topics|photography|Photography|arts|aperture, shutter speed, ISO sensitivity, depth of field, rule of thirds, exposure triangle, golden hour, white balance, focal length, prime lens, bokeh, leading lines, histogram, RAW file, long exposure, fill flash, negative space, street photography, macro photography, colour grading
topics|chess|Chess|games|opening repertoire, pawn structure, king safety, fork, pin, skewer, discovered attack, zugzwang, endgame opposition, castling, en passant, Sicilian Defence, Queen's Gambit, rook endgame, bishop pair, outpost square, prophylaxis, tempo, sacrifice, checkmate pattern
topics|cooking-science|Cooking Science|sci|Maillard reaction, caramelization, emulsification, gluten network, protein denaturation, starch gelatinization, brining, fermentation, leavening agent, smoke point, sous vide, carryover cooking, umami, acid balance, reduction sauce, tempering chocolate, lamination, osmosis in curing, sugar crystallization, knife work
topics|climate-change|Climate Change|sci|greenhouse effect, carbon budget, radiative forcing, albedo, permafrost thaw, ocean acidification, sea level rise, carbon sink, methane emissions, tipping point, climate model, feedback loop, heat dome, glacier retreat, emissions pathway, carbon capture, adaptation planning, mitigation policy, net zero target, paleoclimate record
topics,college,middle|astronomy|Astronomy|sci|light-year, parallax, redshift, main sequence, red giant, white dwarf, neutron star, black hole, exoplanet transit, Kepler's laws, solar wind, lunar phases, eclipse geometry, spectral class, Hubble constant, cosmic microwave background, galaxy cluster, dark matter, nebula, orbital resonance
topics|nutrition|Nutrition|health|macronutrient, micronutrient, dietary fibre, glycaemic index, complete protein, omega-3 fatty acid, electrolyte balance, basal metabolic rate, calorie density, iron absorption, vitamin D, hydration status, food label, added sugar, whole grain, gut microbiome, portion size, meal timing, satiety, sodium intake
topics|first-aid|First Aid|health|recovery position, chest compressions, rescue breaths, defibrillator pads, airway check, choking response, pressure bandage, tourniquet, burn cooling, shock symptoms, sprain care, anaphylaxis, epinephrine injector, concussion signs, heat exhaustion, hypothermia, scene safety, primary survey, wound dressing, emergency call
topics|public-speaking|Public Speaking|eng|speech outline, opening hook, vocal variety, eye contact, stage presence, filler words, audience analysis, call to action, signposting, rhetorical question, pause for effect, visual aids, speaker notes, impromptu speech, persuasive appeal, storytelling arc, Q&A handling, stage fright, pacing, closing line
topics|gardening|Gardening|sci|soil pH, compost pile, crop rotation, companion planting, raised bed, seed germination, mulching, pruning cut, deadheading, perennial border, hardiness zone, drip irrigation, cover crop, aphid control, root cutting, green manure, succession sowing, pollinator strip, potting mix, frost date
topics|cryptography|Cryptography|comp|Caesar cipher, Vigenere cipher, one-time pad, frequency analysis, public key, private key, RSA modulus, Diffie-Hellman exchange, hash function, digital signature, block cipher, AES round, initialization vector, elliptic curve, key stretching, salt value, certificate authority, nonce reuse, side-channel attack, zero-knowledge proof
topics|film-studies|Film Studies|arts|mise-en-scene, montage, continuity editing, establishing shot, tracking shot, diegetic sound, auteur theory, film noir, three-act structure, jump cut, cinematography, Kuleshov effect, shot-reverse-shot, aspect ratio, deep focus, cross-cutting, screenplay format, genre convention, non-linear narrative, colour palette
topics|mythology|Mythology|hist|Mount Olympus, Norse cosmology, Yggdrasil, trickster figure, hero's journey, Odysseus, Gilgamesh, underworld descent, creation myth, Ragnarok, Prometheus, Egyptian pantheon, Osiris, Anansi tales, oracle of Delphi, Labours of Heracles, shapeshifter, flood myth, Valhalla, Persephone
topics|birdwatching|Birdwatching|sci|field mark, binocular magnification, wing bar, eye ring, birdsong mnemonic, migration flyway, raptor silhouette, wader, passerine, breeding plumage, eclipse plumage, life list, spotting scope, nest box, dawn chorus, murmuration, field guide, range map, moult cycle, bird census
topics|woodworking|Woodworking|arts|wood grain, dovetail joint, mortise and tenon, hand plane, chisel sharpening, rip cut, crosscut, table saw fence, router bit, wood glue, clamping pressure, finish sanding, shellac finish, biscuit joint, moisture content, hardwood, plywood, kerf width, marking gauge, dado joint
topics|negotiation|Negotiation|soc|BATNA, reservation price, anchoring, zone of possible agreement, interest-based bargaining, concession strategy, logrolling, active listening, framing effect, walk-away point, integrative deal, distributive bargaining, mediator role, deadline pressure, package offer, tactical silence, rapport building, counteroffer, trust signal, principled negotiation
topics|typography|Typography|arts|serif typeface, sans-serif, kerning, tracking, leading, x-height, baseline grid, ligature, typographic scale, font pairing, widow and orphan, measure length, hierarchy of type, display face, monospace font, small caps, optical size, variable font, ascender, em dash
topics|urban-planning|Urban Planning|hist|zoning code, mixed-use development, transit-oriented development, walkability score, urban sprawl, green belt, floor area ratio, complete street, public realm, gentrification, land value capture, housing density, bus rapid transit, urban heat island, brownfield site, master plan, setback rule, pedestrian plaza, traffic calming, community land trust
topics|sleep-science|Sleep Science|health|circadian rhythm, melatonin, REM sleep, slow-wave sleep, sleep spindle, adenosine pressure, sleep debt, chronotype, sleep latency, blue light, sleep apnea, insomnia, napping strategy, sleep hygiene, jet lag, polysomnography, dream recall, sleep cycle, caffeine half-life, social jet lag
topics|podcasting|Podcasting|eng|episode format, cold open, show notes, RSS feed, dynamic microphone, pop filter, gain staging, room treatment, interview prep, remote recording, audio editing, loudness normalization, intro music, sponsor read, listener retention, episode artwork, transcript file, guest booking, season arc, download metrics
topics|game-design|Game Design|comp|core loop, game mechanic, level design, player agency, difficulty curve, feedback juice, playtesting session, win condition, procedural generation, game economy, onboarding tutorial, emergent gameplay, balance pass, hitbox, state machine, narrative branching, reward schedule, design document, prototype build, accessibility option
topics|beekeeping|Beekeeping|sci|queen bee, worker bee, drone comb, brood frame, honey super, smoker fuel, hive inspection, swarm cell, varroa mite, queen excluder, nectar flow, propolis, royal jelly, waggle dance, overwintering cluster, honey extractor, nuc colony, foundation wax, pollen patty, requeening
college,high,middle|algebra|Algebra|math|linear equation, slope-intercept form, system of equations, quadratic formula, discriminant, polynomial factoring, rational expression, exponent rules, radical equation, absolute value inequality, function notation, domain and range, inverse function, exponential growth, logarithm, arithmetic sequence, geometric series, completing the square, synthetic division, matrix equation
college,high|calculus|Calculus|math|limit definition, continuity, derivative, chain rule, product rule, implicit differentiation, related rates, optimization problem, mean value theorem, L'Hopital's rule, Riemann sum, definite integral, fundamental theorem of calculus, integration by parts, u-substitution, area between curves, volume of revolution, Taylor series, power series, differential equation
college|linear-algebra|Linear Algebra|math|vector space, linear combination, span, linear independence, basis vector, matrix multiplication, determinant, inverse matrix, row reduction, rank-nullity theorem, eigenvalue, eigenvector, diagonalization, orthogonal projection, Gram-Schmidt process, inner product, null space, column space, change of basis, singular value decomposition
college,high|statistics|Statistics|math|sample mean, standard deviation, normal distribution, z-score, sampling distribution, central limit theorem, confidence interval, margin of error, null hypothesis, p-value, type I error, chi-square test, linear regression, correlation coefficient, residual plot, stratified sample, randomized experiment, binomial distribution, box plot, interquartile range
college|discrete-mathematics|Discrete Mathematics|math|propositional logic, truth table, predicate quantifier, proof by induction, proof by contradiction, pigeonhole principle, permutation, combination, binomial coefficient, recurrence relation, graph coloring, Euler path, Hamiltonian cycle, spanning tree, equivalence relation, partial order, modular arithmetic, set cardinality, generating function, Boolean algebra
high,middle|geometry|Geometry|math|congruent triangles, similar figures, Pythagorean theorem, parallel lines, transversal angle, angle bisector, perpendicular bisector, circle theorem, inscribed angle, arc length, sector area, surface area, prism volume, coordinate proof, rigid transformation, dilation, midpoint formula, polygon interior angle, triangle inequality, compass construction
high|trigonometry|Trigonometry|math|unit circle, sine ratio, cosine ratio, tangent ratio, radian measure, reference angle, law of sines, law of cosines, trigonometric identity, double-angle formula, inverse sine, periodic function, amplitude, phase shift, polar coordinates, angle of elevation, sinusoidal model, cofunction identity, Pythagorean identity, bearing problem
high|precalculus|Precalculus|math|piecewise function, function composition, end behavior, rational function asymptote, polynomial zeros, complex number, conic section, parametric equation, vector component, logarithmic scale, exponential decay, sequence limit, transformation of graphs, even and odd functions, matrix determinant, partial fractions, binomial theorem, polar graph, ellipse focus, hyperbola branch
middle|ratios-and-proportions|Ratios and Proportions|math|unit rate, equivalent ratio, ratio table, proportional relationship, constant of proportionality, percent increase, percent decrease, scale drawing, double number line, tape diagram, sales tax, simple interest, markup and discount, cross multiplication, direct variation, recipe scaling, speed as a rate, map scale, part-to-whole ratio, percent of a number
middle|integers-and-rationals|Integers and Rational Numbers|math|negative number, absolute value, number line, opposite numbers, integer addition, integer subtraction, rational number, repeating decimal, terminating decimal, order of operations, distributive property, additive inverse, multiplicative inverse, coordinate plane, quadrant, exponent, square root, scientific notation, least common multiple, greatest common factor
primary|counting|Counting|math|counting on, skip counting, number line hop, tens and ones, counting backwards, one more one less, ten frame, tally marks, number order, counting objects, odd and even, number words, counting by fives, hundred chart, place value blocks, bigger and smaller, counting to twenty, counting to one hundred, pairs, dot patterns
primary|addition-and-subtraction|Addition and Subtraction|math|number bond, make ten, doubles fact, near doubles, fact family, take away, missing addend, column addition, carrying over, borrowing, mental math strategy, word problem, part-part-whole, adding zero, counting back, related facts, bar model, sum, difference, equals sign
primary|multiplication|Multiplication|math|times table, equal groups, array model, repeated addition, skip counting by twos, multiplication fact, factor pair, product, commutative property, doubling strategy, division as sharing, remainder, multiple of five, times ten, grid method, lattice multiplication, fact triangle, arrays of dots, word problem with groups, timed practice
primary|fractions|Fractions|math|numerator, denominator, unit fraction, half and quarter, equal parts, fraction strip, fraction wall, equivalent fraction, comparing fractions, fraction of a set, mixed number, improper fraction, simplifying a fraction, fraction on a number line, adding fractions, pizza model, thirds and sixths, whole number as a fraction, tenths, fraction of a shape
primary|shapes|Shapes|math|triangle, square, rectangle, circle, pentagon, hexagon, cube, sphere, cylinder, cone, vertex, edge, face, line of symmetry, tessellation, right angle, curved side, straight side, shape sorting, pattern block
primary|measurement|Measurement|math|ruler, centimetre, metre, kilogram, litre, measuring jug, balance scale, heavier and lighter, longer and shorter, estimating length, perimeter, area by counting squares, thermometer, capacity, non-standard units, tape measure, weighing scales, millilitre, gram, measuring height
primary|telling-time|Telling Time|math|hour hand, minute hand, o'clock, half past, quarter past, quarter to, analogue clock, digital clock, calendar month, days of the week, seconds, elapsed time, timeline of a day, a.m. and p.m., twenty-four hour clock, minutes past, time word problem, stopwatch, seasons, leap year
primary|money|Money|math|coin values, banknote, making change, counting coins, price tag, saving jar, spending choice, total cost, adding prices, pocket money, piggy bank, needs and wants, shopping list, cents, dollars, exact change, budget, receipt, money word problem, coin combination
college|accounting|Accounting|econ|double-entry bookkeeping, general ledger, trial balance, balance sheet, income statement, cash flow statement, accrual basis, depreciation schedule, accounts receivable, accounts payable, inventory valuation, FIFO method, journal entry, retained earnings, working capital, audit trail, bank reconciliation, chart of accounts, gross margin, owner's equity
high|financial-literacy|Financial Literacy|econ|paycheck stub, gross pay, net pay, checking account, debit card, credit card interest, minimum payment, student loan, savings goal, compound growth, budget spreadsheet, identity theft, insurance premium, car loan, rent agreement, emergency savings, stock share, mutual fund, opportunity cost, consumer rights
college,high|biology|Biology|sci|cell membrane, mitochondria, photosynthesis, cellular respiration, DNA replication, transcription, translation, mitosis, meiosis, natural selection, gene expression, enzyme activity, homeostasis, food web, ecosystem, Mendelian inheritance, protein synthesis, evolutionary tree, immune response, nervous system
college,high,middle|chemistry|Chemistry|sci|atomic structure, electron configuration, periodic trend, ionic bond, covalent bond, molar mass, stoichiometry, limiting reagent, chemical equilibrium, Le Chatelier's principle, reaction rate, activation energy, acid-base titration, pH scale, redox reaction, gas laws, enthalpy change, intermolecular force, solution concentration, Lewis structure
college|organic-chemistry|Organic Chemistry|sci|functional group, alkane, alkene, alkyne, aromatic ring, stereoisomer, chirality center, SN1 mechanism, SN2 mechanism, elimination reaction, carbonyl group, Grignard reagent, nucleophile, electrophile, resonance structure, infrared spectroscopy, NMR spectroscopy, aldol condensation, ester hydrolysis, protecting group
college,high|physics|Physics|sci|Newton's laws, free-body diagram, kinematics equation, projectile motion, momentum conservation, kinetic energy, potential energy, work-energy theorem, circular motion, torque, simple harmonic motion, wave interference, Doppler effect, electric field, Ohm's law, magnetic flux, Faraday's law, thermodynamics, specific heat, photoelectric effect
high,middle|earth-science|Earth Science|sci|plate tectonics, rock cycle, igneous rock, sedimentary layer, metamorphic rock, mineral hardness, weathering, erosion, earthquake epicenter, seismic wave, volcano type, water cycle, groundwater aquifer, weather front, air pressure, ocean current, glacier, fossil record, topographic map, soil horizon
high|environmental-science|Environmental Science|sci|biodiversity, carrying capacity, ecological footprint, renewable energy, fossil fuel, watershed, eutrophication, invasive species, habitat fragmentation, air quality index, acid rain, ozone layer, sustainable agriculture, wastewater treatment, life cycle assessment, keystone species, deforestation, endangered species, nitrogen cycle, environmental impact statement
middle|life-science|Life Science|sci|cell theory, plant cell, animal cell, microscope, organelle, photosynthesis, food chain, producer and consumer, decomposer, adaptation, inherited trait, Punnett square, classification kingdom, vertebrate, invertebrate, life cycle, habitat, body system, bacteria, pollination
middle|physical-science|Physical Science|sci|speed and velocity, acceleration, balanced forces, friction, gravity, simple machine, lever, pulley, energy transfer, heat conduction, convection, radiation, states of matter, density, mixture and solution, chemical change, physical change, electric circuit, magnetism, sound wave
college,high|anatomy|Anatomy|sci|skeletal system, axial skeleton, synovial joint, skeletal muscle, sarcomere, cardiac cycle, coronary artery, pulmonary circulation, alveoli, nephron, digestive tract, hepatic portal system, endocrine gland, cranial nerve, spinal cord, lymph node, integumentary system, anatomical position, sagittal plane, tendon and ligament
college|geology|Geology|sci|mineral identification, crystal lattice, magma differentiation, Bowen's reaction series, stratigraphy, unconformity, radiometric dating, fault plane, fold structure, subduction zone, mid-ocean ridge, hot spot volcano, metamorphic facies, sedimentary basin, karst landscape, glacial moraine, mass wasting, seismic tomography, rock thin section, geologic time scale
primary|plants-and-animals|Plants and Animals|sci|seed, roots, stem, leaves, flower, sunlight, mammal, bird, fish, reptile, insect, habitat, baby animals, life cycle of a frog, caterpillar to butterfly, herbivore, carnivore, food for animals, growing a bean, animal homes
primary|weather|Weather|sci|sunny day, cloud type, rain gauge, wind direction, weather vane, thermometer reading, snowflake, thunderstorm, rainbow, seasons, weather chart, temperature, fog, hail, puddle, weather forecast, water cycle, wind sock, hot and cold, umbrella weather
primary|the-human-body|The Human Body|health|heart beat, lungs, skeleton, muscles, five senses, brain, teeth, healthy food, exercise, sleep, washing hands, germs, bones, stomach, skin, eyes, ears, growing up, keeping safe, breathing
college,high,middle|world-history|World History|hist|Mesopotamia, Roman Republic, Han dynasty, Silk Road, Islamic Golden Age, feudalism, Black Death, Renaissance humanism, Protestant Reformation, Columbian exchange, Ottoman Empire, Mughal Empire, Enlightenment, French Revolution, Industrial Revolution, Meiji Restoration, imperialism, World War I, decolonization, Cold War
college,high,middle|us-history|US History|hist|Jamestown colony, Mayflower Compact, Declaration of Independence, Articles of Confederation, Constitutional Convention, Bill of Rights, Louisiana Purchase, Manifest Destiny, Missouri Compromise, Reconstruction, Gilded Age, Progressive Era, New Deal, Great Depression, Harlem Renaissance, civil rights movement, Brown v. Board, Great Migration, Marshall Plan, Watergate
college|art-history|Art History|arts|Byzantine mosaic, Gothic cathedral, linear perspective, chiaroscuro, Baroque painting, Rococo, Neoclassicism, Romanticism, Impressionism, Post-Impressionism, Cubism, Surrealism, Abstract Expressionism, Pop Art, fresco technique, iconography, patronage, contrapposto, sfumato, Bauhaus
middle|ancient-civilizations|Ancient Civilizations|hist|Fertile Crescent, cuneiform, Code of Hammurabi, pharaoh, pyramid building, hieroglyphics, Indus Valley, Harappa, Zhou dynasty, Mandate of Heaven, Athenian democracy, Spartan society, Olympic games, Roman aqueduct, Julius Caesar, Maya calendar, Olmec heads, Phoenician alphabet, Great Wall, Persian Empire
high,middle,primary|geography|Geography|hist|latitude, longitude, map projection, continent, river delta, climate zone, population density, urbanization, tectonic landform, mountain range, desert biome, rainforest, monsoon, migration pattern, natural resource, trade route, time zone, compass rose, map legend, physical map
middle|civics|Civics|soc|citizenship, rule of law, branches of government, checks and balances, separation of powers, local government, voting rights, jury duty, constitution, amendment process, city council, public budget, community service, political party, free press, due process, petition, town hall meeting, representative, ballot measure
high|government|Government|soc|federalism, judicial review, Supreme Court, Congress, executive order, veto power, filibuster, electoral college, interest group, campaign finance, civil liberties, civil rights, bureaucracy, Federalist Papers, popular sovereignty, gerrymandering, primary election, public opinion poll, commerce clause, incorporation doctrine
college|political-science|Political Science|soc|social contract, sovereignty, liberal democracy, authoritarian regime, proportional representation, first-past-the-post, coalition government, median voter theorem, collective action problem, realism in international relations, liberal institutionalism, soft power, nation-state, political culture, policy cycle, comparative politics, game theory model, veto player, rent seeking, political legitimacy
college,high|economics|Economics|econ|supply and demand, price elasticity, opportunity cost, comparative advantage, marginal utility, consumer surplus, market equilibrium, price ceiling, externality, public good, monopoly pricing, gross domestic product, inflation rate, unemployment rate, fiscal policy, monetary policy, interest rate, exchange rate, trade deficit, business cycle
college|microeconomics|Microeconomics|econ|indifference curve, budget constraint, marginal rate of substitution, income effect, substitution effect, production function, marginal cost, average total cost, economies of scale, perfect competition, oligopoly, Nash equilibrium, price discrimination, deadweight loss, Pigouvian tax, moral hazard, adverse selection, labour supply, factor market, Pareto efficiency
college|macroeconomics|Macroeconomics|econ|aggregate demand, aggregate supply, IS-LM model, Phillips curve, money multiplier, quantitative easing, central bank independence, Solow growth model, natural rate of unemployment, output gap, fiscal multiplier, crowding out, balance of payments, purchasing power parity, real interest rate, nominal GDP, GDP deflator, stagflation, sovereign debt, Taylor rule
college,high|psychology|Psychology|soc|classical conditioning, operant conditioning, working memory, long-term memory, cognitive dissonance, confirmation bias, attachment style, Piaget's stages, neuron firing, neurotransmitter, sensory perception, social conformity, bystander effect, personality trait, intrinsic motivation, placebo effect, experimental control, developmental milestone, stress response, heuristic
college|sociology|Sociology|soc|socialization, social stratification, cultural capital, deviance, social mobility, institution, norms and values, role strain, urban sociology, ethnography, survey sampling, symbolic interactionism, structural functionalism, conflict theory, social network, gender roles, bureaucratic organisation, globalization, collective behaviour, secularization
college|philosophy|Philosophy|soc|Socratic method, Plato's forms, Aristotelian virtue, Cartesian doubt, empiricism, rationalism, categorical imperative, utilitarianism, social contract theory, existentialism, free will, personal identity, mind-body problem, epistemic justification, modus ponens, informal fallacy, moral relativism, theory of knowledge, philosophy of science, trolley problem
college,high,middle|spanish|Spanish|lang|ser and estar, preterite tense, imperfect tense, subjunctive mood, direct object pronoun, reflexive verb, gustar construction, gender agreement, por and para, stem-changing verb, future tense, conditional tense, commands, possessive adjective, accent mark, false cognate, greetings, numbers in Spanish, Hispanic culture, listening practice
college,high,middle|french|French|lang|passe compose, imparfait, subjonctif, etre and avoir, partitive article, liaison, nasal vowel, reflexive verb, adjective agreement, negation ne pas, futur simple, conditionnel, relative pronoun, direct object pronoun, tu and vous, numbers in French, francophone culture, faux ami, accent grave, dictation practice
high|latin|Latin|lang|first declension, second declension, third declension, nominative case, accusative case, ablative absolute, present indicative, perfect tense, principal parts, participle, gerundive, indirect statement, subjunctive clause, relative clause, Caesar's Gallic War, Vergil's Aeneid, dactylic hexameter, derivative word, deponent verb, Roman numerals
middle,primary|grammar|Grammar|eng|noun, verb, adjective, adverb, pronoun, preposition, conjunction, subject and predicate, complete sentence, sentence fragment, run-on sentence, comma in a list, apostrophe, quotation marks, capital letter, past tense, plural noun, subject-verb agreement, question mark, paragraph
primary|phonics|Phonics|eng|letter sounds, short vowel, long vowel, consonant blend, digraph, sh sound, ch sound, th sound, rhyming words, syllable clap, sight words, silent e, word family, sounding out, beginning sound, ending sound, vowel team, decodable book, letter formation, blending sounds
primary|reading|Reading|eng|picture book, story character, story setting, beginning middle and end, main idea, retelling, predicting, question words, reading aloud, fluency, new vocabulary, nonfiction book, table of contents, author and illustrator, favourite part, making connections, poem, fairy tale, reading log, library visit
primary|spelling|Spelling|eng|spelling pattern, double letters, silent letters, plural s, plural es, adding ing, adding ed, tricky words, homophones, compound words, prefix un, suffix ful, look say cover write check, alphabetical order, syllables, spelling test, word wall, word search, dictionary skills, letter string
primary,middle|writing|Writing|eng|topic sentence, supporting detail, paragraph structure, opinion writing, narrative writing, informative writing, first draft, revising, editing checklist, transition words, strong verbs, descriptive language, dialogue punctuation, story plan, concluding sentence, audience and purpose, writing conference, publishing, graphic organiser, personal narrative
middle|reading-comprehension|Reading Comprehension|eng|central idea, supporting evidence, inference, theme, point of view, text structure, compare and contrast, cause and effect, context clues, figurative language, summary, character motivation, plot diagram, conflict, author's purpose, argument and claim, informational text, tone and mood, annotation, making predictions
college,high|english-composition|English Composition|eng|thesis statement, claim and counterclaim, rhetorical situation, ethos, pathos, logos, annotated bibliography, MLA citation, APA citation, paraphrase, synthesis essay, argumentative essay, peer review, revision strategy, paragraph cohesion, sentence variety, active voice, concision, academic register, literature review
high|english-literature|English Literature|eng|Shakespearean sonnet, tragic hero, dramatic irony, soliloquy, iambic pentameter, unreliable narrator, Gothic novel, Romantic poetry, modernist novel, stream of consciousness, allegory, symbolism, foil character, extended metaphor, bildungsroman, satire, free verse, narrative frame, epiphany, close reading
high|journalism|Journalism|eng|inverted pyramid, lede, nut graf, news value, attribution, source verification, fact-checking, press release, headline writing, byline, interview technique, news beat, editorial, op-ed, feature story, press freedom, libel law, data journalism, photo caption, style guide
high,middle,primary|art|Art|arts|colour wheel, primary colours, complementary colours, line and shape, texture, value scale, contour drawing, still life, watercolour wash, collage, printmaking, clay sculpture, portrait proportions, one-point perspective, composition balance, pattern and rhythm, foreground and background, art critique, sketchbook, mixed media
college,high|music-theory|Music Theory|music|major scale, minor scale, key signature, circle of fifths, interval, triad, seventh chord, chord inversion, cadence, Roman numeral analysis, voice leading, time signature, syncopation, modulation, secondary dominant, counterpoint, figured bass, sonata form, twelve-bar blues, ear training
middle,primary|music|Music|music|steady beat, rhythm pattern, quarter note, half note, rest, tempo, dynamics, pitch, melody, harmony, percussion instrument, string instrument, woodwind, brass, singing voice, call and response, ostinato, verse and chorus, orchestra, music notation
college,high,middle|computer-science|Computer Science|comp|algorithm, variable assignment, conditional statement, for loop, while loop, function call, recursion, array index, linked list, binary search, sorting algorithm, Big-O notation, object-oriented design, class inheritance, boolean logic, binary number, compiler, operating system, computer network, unit test
college|data-structures|Data Structures|comp|dynamic array, singly linked list, stack, queue, deque, hash table, open addressing, binary search tree, AVL rotation, red-black tree, binary heap, priority queue, trie, graph adjacency list, breadth-first search, depth-first search, union-find, amortized analysis, B-tree, skip list
college|machine-learning|Machine Learning|comp|training set, validation split, overfitting, regularization, gradient descent, learning rate, loss function, logistic regression, decision tree, random forest, support vector machine, k-means clustering, principal component analysis, neural network, backpropagation, convolutional layer, cross-validation, precision and recall, feature engineering, transformer attention
high|robotics|Robotics|comp|servo motor, stepper motor, microcontroller, ultrasonic sensor, line follower, PID controller, gear ratio, drivetrain, encoder tick, autonomous mode, chassis design, wiring harness, battery voltage, robot arm, end effector, kinematic chain, state estimation, obstacle avoidance, remote control, competition field
high,middle,primary|health|Health|health|balanced diet, physical activity, heart rate, sleep routine, hand hygiene, mental wellbeing, stress management, peer pressure, nutrition label, hydration, sun safety, dental care, vaccination, first-aid kit, road safety, screen time, friendship skills, growth and development, medicine safety, personal hygiene
`

type family struct {
	Tiers []string
	Slug  string
	Name  string
	Area  string
	Terms []string
}

func parseFamilies() []family {
	var out []family
	for _, line := range strings.Split(familyData, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "|", 5)
		var terms []string
		for _, t := range strings.Split(f[4], ",") {
			terms = append(terms, strings.TrimSpace(t))
		}
		out = append(out, family{Tiers: strings.Split(f[0], ","), Slug: f[1], Name: f[2], Area: f[3], Terms: terms})
	}
	return out
}

// area gives the words that make a family's prose sound like its field.
type area struct {
	Tag      string   // subject tag
	Verbs    []string // what learners do
	Objects  []string // what they work with
	People   []string // who does it for a living
	Visuals  []string // illustration kinds
	Aspects  []string // card label aspects
	Extra    []string // area-specific sentences; {t} {u} {s} slots
	Interact []string // interactive kinds
}

var areas = map[string]area{
	"math": {
		Tag:     "mathematics",
		Verbs:   []string{"solve", "simplify", "graph", "prove", "estimate", "check", "rewrite", "compare"},
		Objects: []string{"equation", "expression", "diagram", "proof", "table of values", "number", "model"},
		People:  []string{"mathematicians", "engineers", "statisticians", "teachers"},
		Visuals: []string{"labelled graph", "number line", "worked diagram", "coordinate grid", "geometric figure"},
		Aspects: []string{"Definition", "Worked case", "Common mistakes", "Visual model", "Why it works", "Practice set", "Special cases", "Connections", "Summary", "Estimation check"},
		Extra: []string{
			"Write each step on its own line so that an error in {t} is easy to find later.",
			"Substituting a small number is a quick way to test whether a rule about {t} holds.",
			"Once {t} feels routine, {u} becomes a matter of applying the same moves in a new order.",
			"A sketch of the {o} often shows at a glance what {t} predicts.",
			"Exact answers are preferred here; round only at the very end of a {t} calculation.",
		},
		Interact: []string{"graph-plotter", "number-line", "slider"},
	},
	"sci": {
		Tag:     "science",
		Verbs:   []string{"measure", "observe", "model", "predict", "classify", "test", "record", "explain"},
		Objects: []string{"experiment", "sample", "data table", "model", "observation", "specimen", "measurement"},
		People:  []string{"scientists", "field researchers", "lab technicians", "naturalists"},
		Visuals: []string{"labelled diagram", "cross-section", "data chart", "photograph", "cycle diagram"},
		Aspects: []string{"Key idea", "Evidence", "In the lab", "Real-world example", "Misconceptions", "Model", "Data check", "Safety note", "Summary", "Going further"},
		Extra: []string{
			"A controlled comparison is the cleanest way to see {t} at work.",
			"Measurements of {t} always carry some uncertainty, so record the units and the precision.",
			"The same process behind {t} also shows up, on a different scale, in {u}.",
			"When the data disagree with the model of {t}, the model is what has to change.",
			"Field notes about {t} are most useful when they say where, when and how the observation was made.",
		},
		Interact: []string{"simulation", "slider", "drag-sort"},
	},
	"hist": {
		Tag:     "history",
		Verbs:   []string{"analyse", "compare", "date", "trace", "interpret", "question", "map", "summarise"},
		Objects: []string{"primary source", "timeline", "map", "chronicle", "artefact", "treaty", "account"},
		People:  []string{"historians", "archaeologists", "geographers", "archivists"},
		Visuals: []string{"historical map", "timeline", "engraving", "photograph of an artefact", "chart of events"},
		Aspects: []string{"Context", "Causes", "Consequences", "Key figures", "Sources", "Turning point", "Perspectives", "Legacy", "Summary", "Debate"},
		Extra: []string{
			"Ask who wrote the source about {t}, for whom, and why it survived.",
			"Placing {t} on a timeline next to {u} makes cause and effect easier to argue.",
			"Later writers often retold {t} to suit their own purposes, so compare several accounts.",
			"The consequences of {t} were felt unevenly: some groups gained while others lost.",
			"A map shows how geography shaped {t} in ways a list of dates cannot.",
		},
		Interact: []string{"timeline", "map-label", "drag-sort"},
	},
	"lang": {
		Tag:     "languages",
		Verbs:   []string{"conjugate", "translate", "pronounce", "listen for", "practise", "read aloud", "write", "compare"},
		Objects: []string{"sentence", "dialogue", "verb table", "phrase", "short text", "conversation"},
		People:  []string{"native speakers", "translators", "language teachers", "travellers"},
		Visuals: []string{"illustrated dialogue", "verb chart", "vocabulary card", "street scene", "comic strip"},
		Aspects: []string{"Form", "Usage", "Examples", "Pronunciation", "Common errors", "Culture note", "Practice", "Dialogue", "Summary", "Review"},
		Extra: []string{
			"Say each example aloud: {t} is easier to remember once you have heard yourself use it.",
			"Learners who mix up {t} and {u} usually fix it by studying short dialogues.",
			"Native speakers rarely think about {t}; they simply hear when it sounds wrong.",
			"Keep a personal list of sentences that use {t} correctly and review it weekly.",
			"Context, not a rule table, usually decides how {t} is used in conversation.",
		},
		Interact: []string{"matching", "audio-repeat", "drag-sort"},
	},
	"eng": {
		Tag:     "english",
		Verbs:   []string{"read", "draft", "revise", "annotate", "outline", "edit", "present", "discuss"},
		Objects: []string{"paragraph", "draft", "passage", "outline", "speech", "text", "sentence"},
		People:  []string{"writers", "editors", "readers", "speakers"},
		Visuals: []string{"annotated page", "graphic organiser", "illustrated book page", "outline chart", "story map"},
		Aspects: []string{"What it is", "Spotting it", "Using it", "Model text", "Common slips", "Revision tip", "Practice", "Reading closely", "Summary", "Try it"},
		Extra: []string{
			"Read the passage twice: once for meaning and once to notice how {t} is doing its work.",
			"Good writers use {t} on purpose, and revise when it gets in the way of the reader.",
			"Marking {t} in the margin makes the structure of a text visible.",
			"Compare a sentence with and without {t} to hear the difference it makes.",
			"When {t} and {u} appear together, the reader usually notices the second one first.",
		},
		Interact: []string{"highlight-text", "drag-sort", "matching"},
	},
	"arts": {
		Tag:     "arts",
		Verbs:   []string{"sketch", "compose", "frame", "critique", "experiment with", "practise", "study", "build"},
		Objects: []string{"composition", "sketch", "project", "piece", "study", "portfolio", "frame"},
		People:  []string{"artists", "designers", "makers", "critics"},
		Visuals: []string{"annotated photograph", "sketch", "side-by-side comparison", "close-up detail", "step sequence"},
		Aspects: []string{"Look closely", "Technique", "Materials", "Example work", "Common pitfalls", "Try this", "History", "Critique", "Summary", "Studio tip"},
		Extra: []string{
			"Make three quick studies that exaggerate {t} before attempting the finished piece.",
			"Critics often judge {t} by how well it serves the whole composition.",
			"Working with {t} is a skill of the hands as much as of the eye.",
			"Compare your work with a master example that also relies on {t}.",
			"Small changes in {t} can completely change the mood of a piece.",
		},
		Interact: []string{"image-compare", "slider", "drag-sort"},
	},
	"music": {
		Tag:     "music",
		Verbs:   []string{"listen to", "clap", "sing", "play", "notate", "analyse", "compose", "hear"},
		Objects: []string{"score", "phrase", "passage", "melody", "chord progression", "rhythm"},
		People:  []string{"musicians", "composers", "conductors", "performers"},
		Visuals: []string{"notated excerpt", "keyboard diagram", "instrument photograph", "rhythm grid", "score page"},
		Aspects: []string{"Listen", "On the page", "At the keyboard", "In a piece", "Common slips", "Practice", "Ear check", "Context", "Summary", "Play along"},
		Extra: []string{
			"Clap or sing the example before reading about {t}; the ear learns faster than the eye.",
			"Composers use {t} to create tension that {u} later releases.",
			"Find {t} in a piece you already know and mark where it happens.",
			"Slow practice makes {t} reliable; speed comes afterwards.",
			"Performers shape {t} differently, so compare two recordings.",
		},
		Interact: []string{"audio-repeat", "rhythm-tapper", "matching"},
	},
	"comp": {
		Tag:     "computing",
		Verbs:   []string{"implement", "debug", "trace", "design", "test", "refactor", "analyse", "run"},
		Objects: []string{"program", "function", "test case", "data structure", "diagram", "prototype", "log"},
		People:  []string{"programmers", "engineers", "designers", "security researchers"},
		Visuals: []string{"code listing", "flow diagram", "memory diagram", "architecture sketch", "state chart"},
		Aspects: []string{"Concept", "In code", "Tracing", "Edge cases", "Performance", "Pitfalls", "Design choice", "Testing", "Summary", "Exercise"},
		Extra: []string{
			"Trace {t} by hand on a tiny input before trusting it on a large one.",
			"Most bugs around {t} hide in the edge cases: empty input, one element, and the maximum size.",
			"A short test that pins down {t} is worth more than a long explanation.",
			"Choosing between {t} and {u} is a trade-off between time, memory and clarity.",
			"Name things after what they mean, not after how {t} happens to be implemented.",
		},
		Interact: []string{"code-runner", "step-tracer", "drag-sort"},
	},
	"econ": {
		Tag:     "economics",
		Verbs:   []string{"calculate", "compare", "forecast", "plan", "evaluate", "track", "graph", "decide"},
		Objects: []string{"budget", "graph", "statement", "scenario", "data series", "model", "trade-off"},
		People:  []string{"economists", "accountants", "financial planners", "analysts"},
		Visuals: []string{"supply and demand chart", "bar chart", "statement extract", "flow diagram", "table of figures"},
		Aspects: []string{"Core idea", "On a graph", "In the numbers", "Real case", "Pitfalls", "Policy angle", "Decision", "Practice", "Summary", "Scenario"},
		Extra: []string{
			"Put numbers on {t}: even rough figures make the trade-off concrete.",
			"A change in {t} rarely happens alone; look for the effect on {u}.",
			"Analysts compare {t} across years and across peers before drawing conclusions.",
			"Incentives explain most of what happens to {t}.",
			"Draw the graph before the algebra when reasoning about {t}.",
		},
		Interact: []string{"slider", "calculator", "graph-plotter"},
	},
	"soc": {
		Tag:     "social-science",
		Verbs:   []string{"analyse", "compare", "debate", "observe", "interpret", "argue", "survey", "evaluate"},
		Objects: []string{"case study", "argument", "survey", "institution", "text", "experiment", "debate"},
		People:  []string{"researchers", "philosophers", "policy makers", "social scientists"},
		Visuals: []string{"concept map", "case-study photograph", "chart of survey results", "flow chart", "comparison table"},
		Aspects: []string{"Key idea", "Classic study", "Argument", "Counterpoint", "Everyday example", "Evidence", "Critique", "Application", "Summary", "Discussion"},
		Extra: []string{
			"Researchers test claims about {t} against evidence, not intuition.",
			"A good case study of {t} shows both the pattern and the exceptions.",
			"The strongest objection to {t} usually comes from {u}.",
			"Everyday life is full of small examples of {t} once you start looking.",
			"Define {t} precisely before arguing about it, or the debate goes in circles.",
		},
		Interact: []string{"scenario-choice", "drag-sort", "poll"},
	},
	"health": {
		Tag:     "health",
		Verbs:   []string{"practise", "notice", "plan", "check", "track", "choose", "explain", "prepare"},
		Objects: []string{"routine", "checklist", "habit", "plan", "label", "symptom", "step"},
		People:  []string{"nurses", "doctors", "coaches", "health educators"},
		Visuals: []string{"step-by-step illustration", "body diagram", "checklist card", "infographic", "photograph"},
		Aspects: []string{"Why it matters", "What to do", "Warning signs", "Everyday habit", "Myths", "Step by step", "Practice", "Check yourself", "Summary", "Plan"},
		Extra: []string{
			"Small daily habits around {t} matter more than occasional big efforts.",
			"Health educators teach {t} as a sequence of simple, repeatable steps.",
			"When in doubt about {t}, ask a trusted adult or a professional.",
			"Tracking {t} for a week shows patterns that are hard to notice otherwise.",
			"Myths about {t} spread quickly, so check what the evidence says.",
		},
		Interact: []string{"checklist", "drag-sort", "scenario-choice"},
	},
	"games": {
		Tag:     "games",
		Verbs:   []string{"calculate", "plan", "analyse", "play through", "evaluate", "spot", "defend against", "practise"},
		Objects: []string{"position", "move sequence", "board", "game", "plan", "puzzle"},
		People:  []string{"grandmasters", "coaches", "club players", "analysts"},
		Visuals: []string{"board diagram", "move arrow diagram", "position snapshot", "game record", "heat map of squares"},
		Aspects: []string{"Idea", "Pattern", "Example game", "Traps", "Calculation", "Plan", "Puzzle", "Defence", "Summary", "Drill"},
		Extra: []string{
			"Set up the position on a real board and look for {t} before reading on.",
			"Strong players recognise {t} instantly because they have seen it hundreds of times.",
			"When {t} does not work, {u} is often the resource that saves the game.",
			"Calculate forcing moves first when {t} is in the air.",
			"Review your own games to find where {t} was missed.",
		},
		Interact: []string{"board-puzzle", "drag-sort", "matching"},
	},
}
